#!/bin/bash
# SPDX-License-Identifier: MIT
# Two ranks in two network namespaces, joined by two veth links, exchange halos over UCX TCP: the
# data path between separate network stacks, and two rails (PMR_UCX_DEVICES) that both carry data.
#
#   usage: netns_ucx.sh <mpiexec> <test_rails> <test_exchange>
#
# MPI's own bootstrap needs a path between the ranks too: PMIx 4 clients reach their server only by
# TCP, on loopback by default, which a rank in another namespace cannot reach. So mpirun runs in
# ns0, a launcher moves rank 1 into ns1 (by OMPI_COMM_WORLD_RANK), and PMIx gets a third link of its
# own (pmrm, remote connections allowed on its subnet only). MPI's data stays in shared memory (btl
# self,vader), so the bytes on links pmr0 and pmr1 are pmr's UCX traffic. Everything lives in the
# namespaces this script creates and deletes (addresses 10.77.x.y exist only inside them). Needs
# root and `ip`; exits 77 (CTest: skipped) with the reason where namespaces cannot be made.
set -u

mpiexec=$1
test_rails=$2
test_exchange=$3

# shellcheck source=../scripts/netns-lib.sh
. "$(cd "$(dirname "$0")" && pwd)/../scripts/netns-lib.sh"
netns_init netns_ucx
ns0=${netns_tag}-ns0
ns1=${netns_tag}-ns1
work=$netns_work
netns_add "$ns0" "$ns1"

# Link k joins pmr<k> in ns0 (10.77.<k+1>.1) with pmr<k> in ns1 (10.77.<k+1>.2): the same device
# names on both sides, so that one PMR_UCX_DEVICES serves both ranks.
for k in 0 1; do
    netns_veth "$ns0" "pmr$k" "$ns1" "pmr$k"
    netns_address "$ns0" "pmr$k" "10.77.$((k + 1)).1/24"
    netns_address "$ns1" "pmr$k" "10.77.$((k + 1)).2/24"
done
netns_veth "$ns0" pmrm "$ns1" pmrm
netns_address "$ns0" pmrm 10.77.9.1/24
netns_address "$ns1" pmrm 10.77.9.2/24
if command -v ping > /dev/null; then
    ip netns exec "$ns0" ping -c 1 -W 2 10.77.1.2 > /dev/null &&
        ip netns exec "$ns0" ping -c 1 -W 2 10.77.2.2 > /dev/null ||
        { echo "netns_ucx: FAILED: the veth links do not carry packets"; exit 1; }
fi

netns_launcher "$work/launch" 1 "$ns0" "$ns1"

tx() { # bytes sent by device $2 in namespace $1
    ip netns exec "$1" cat "/sys/class/net/$2/statistics/tx_bytes"
}
counters() {
    echo "$(tx "$ns0" pmr0) $(tx "$ns0" pmr1) $(tx "$ns1" pmr0) $(tx "$ns1" pmr1)"
}

run() { # name, environment..., -- command...
    local name=$1
    shift
    local env=()
    while [ "$1" != -- ]; do
        env+=("$1")
        shift
    done
    shift
    echo "netns_ucx: $name"
    netns_run env PMR_PROVIDER=ucx UCX_TLS=tcp PMR_TIMEOUT=60 "${env[@]}" \
        PMIX_MCA_ptl_tcp_remote_connections=1 PMIX_MCA_ptl_tcp_if_include=10.77.9.0/24 \
        timeout 300 ip netns exec "$ns0" "$mpiexec" --allow-run-as-root --oversubscribe \
        --bind-to none --mca btl self,vader --mca pml ob1 -np 2 "$work/launch" "$@" \
        > "$work/out" 2>&1
    local rc=$?
    if [ $rc != 0 ] || ! grep -q "all passed" "$work/out"; then
        tail -40 "$work/out"
        echo "netns_ucx: FAILED: $name (exit code $rc)"
        exit 1
    fi
    grep "pmr tests on" "$work/out"
}

# Every link must carry at least this much pmr data per direction (the tests move megabytes).
least=1000000
check_rails() { # name, counters before, counters after, rails expected to carry data
    local name=$1 rails=$4
    local -a before=($2) after=($3)
    local labels=("ns0 pmr0" "ns0 pmr1" "ns1 pmr0" "ns1 pmr1")
    for i in 0 1 2 3; do
        local delta=$((after[i] - before[i]))
        local device=$((i % 2))
        echo "netns_ucx: $name: ${labels[i]} sent $delta B"
        if [ "$device" -lt "$rails" ] && [ $delta -lt $least ]; then
            echo "netns_ucx: FAILED: $name: ${labels[i]} carried only $delta B"
            exit 1
        fi
        if [ "$device" -ge "$rails" ] && [ $delta -ge $least ]; then
            echo "netns_ucx: FAILED: $name: ${labels[i]} carried $delta B but is not a rail"
            exit 1
        fi
    done
}

c0=$(counters)
run "halo exchange over one link (UCX_NET_DEVICES=pmr0)" UCX_NET_DEVICES=pmr0 -- "$test_exchange"
c1=$(counters)
check_rails "one link" "$c0" "$c1" 1

run "two rails over two links (PMR_UCX_DEVICES=pmr0,pmr1)" PMR_UCX_DEVICES=pmr0,pmr1 -- \
    "$test_rails" "[rails]"
c2=$(counters)
check_rails "two rails" "$c1" "$c2" 2

run "two rails, sequence words put on each rail" PMR_UCX_DEVICES=pmr0,pmr1 PMR_UCX_SIGNAL=put -- \
    "$test_rails" "[rails]"
c3=$(counters)
check_rails "two rails, put signals" "$c2" "$c3" 2

echo "netns_ucx: passed"
