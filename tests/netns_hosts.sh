#!/bin/bash
# SPDX-License-Identifier: MIT
# A multi-host testbed in network namespaces: k emulated hosts on one bridge, one or more ranks per
# host, pmr on UCX over TCP between them (UCX_TLS=tcp on the hosts' data interfaces).
#
#   usage: netns_hosts.sh [options] <mpiexec> <tests folder> <pmr-bench, or - for none>
#     --hosts K           emulated hosts (default 2; 2 to 8)
#     --ranks-per-host R  ranks started in each host (default 1)
#     --rounds N          verified rounds per link fault (default 2000; full run: 100000)
#     --timeout S         PMR_TIMEOUT of the link-down case (default 10)
#     --only LIST         phases to run, comma separated (default suite,bench,faults,down)
#     --faults REGEX      only the faults whose names match (e.g. 'loss'; default: all)
#
# Phases:
#   suite   the multi-rank tests (test_exchange, test_cartesian, test_collectives, test_neighbor)
#           on all K*R ranks, test_rails between host 0 and host 1; every host's data interface
#           must carry pmr's bytes
#   bench   pmr-bench pingpong and exchange between host 0 and host 1, pmr on UCX against Open MPI's
#           TCP transport on the same interface, in the same run
#   faults  test_soak's verified rounds between host 0 and host 1 over a faulty wire
#           (scripts/netns-wire.py: loss 1 %, loss 5 %, delay 1 ms +- 0.5 ms, reordering): zero
#           wrong or lost messages, and the rounds per second under each fault
#   down    the wire's interface on host 1 goes down for good in the middle of verified rounds:
#           both ranks must end in pmr::Timeout or pmr::PeerLost within PMR_TIMEOUT, not hang.
#           All namespaces share one PID namespace, so pmr's watch of the peer's process sees it
#           alive: Timeout is the expected outcome.
#
# Topology (scripts/netns-lib.sh): a switch namespace holds bridge `data` (10.79.1.0/24, every
# host's `data0`) and bridge `boot` (10.79.99.0/24, every host's `boot`: PMIx and MPI's bootstrap,
# never faulty); hosts 0 and 1 also have `wire0` (10.79.2.0/24), joined by netns-wire.py in the
# switch namespace instead of a bridge. MPI's own data between ranks stays in shared memory (btl
# self,vader) except in the bench phase, where it is the competitor and uses btl tcp on data0.
# Needs root, iproute2, python3 and Open MPI; exits 77 (CTest: skipped) with the reason otherwise.
# Everything is removed on exit, also when interrupted.
set -u

here=$(cd "$(dirname "$0")" && pwd)
hosts=2
per_host=1
rounds=2000
down_timeout=10
only=suite,bench,faults,down
faults=.
while [ $# -gt 0 ]; do
    case $1 in
    --hosts) hosts=$2 && shift 2 ;;
    --ranks-per-host) per_host=$2 && shift 2 ;;
    --rounds) rounds=$2 && shift 2 ;;
    --timeout) down_timeout=$2 && shift 2 ;;
    --only) only=$2 && shift 2 ;;
    --faults) faults=$2 && shift 2 ;;
    --*) echo "netns_hosts: unknown option $1" && exit 2 ;;
    *) break ;;
    esac
done
[ $# = 3 ] || { sed -n '5,12p' "$0"; exit 2; }
mpiexec=$1
tests=$2
bench=$3
if [ "$bench" = - ]; then # built without benchmarks
    only=${only//bench/}
fi
if [ "$hosts" -lt 2 ] || [ "$hosts" -gt 8 ]; then
    echo "netns_hosts: --hosts must be 2 to 8"
    exit 2
fi

# shellcheck source=../scripts/netns-lib.sh
. "$here/../scripts/netns-lib.sh"
netns_init netns_hosts python3 timeout
phase() { [[ ",$only," == *",$1,"* ]]; }

sw=${netns_tag}-sw
host=()
for ((h = 0; h < hosts; ++h)); do
    host+=("${netns_tag}-h$h")
done
netns_add "$sw" "${host[@]}"
netns_bridge "$sw" data
netns_bridge "$sw" boot
for ((h = 0; h < hosts; ++h)); do
    netns_veth "${host[h]}" data0 "$sw" "d$h"
    netns_port "$sw" data "d$h"
    netns_address "${host[h]}" data0 "10.79.1.$((h + 1))/24"
    netns_veth "${host[h]}" boot "$sw" "b$h"
    netns_port "$sw" boot "b$h"
    netns_address "${host[h]}" boot "10.79.99.$((h + 1))/24"
done
for h in 0 1; do
    netns_veth "${host[h]}" wire0 "$sw" "w$h"
    netns_address "${host[h]}" wire0 "10.79.2.$((h + 1))/24"
    # Frames of at most one MTU: a fault hits one segment, as on a real wire, not a 64 KiB burst.
    ip -n "${host[h]}" link set wire0 gso_max_size 1500 2> /dev/null
done

netns_launcher "$netns_work/launch" "$per_host" "${host[@]}"
netns_launcher "$netns_work/launch-pair" 1 "${host[0]}" "${host[1]}"

tx() { # bytes sent by device $2 of host $1
    ip netns exec "${host[$1]}" cat "/sys/class/net/$2/statistics/tx_bytes"
}

# mpirun in host 0, ranks by launcher; arguments: log file, launcher, ranks, extra mpirun
# arguments up to --, then the command. Environment for pmr comes from the caller (exported).
mpi() {
    local log=$1 launcher=$2 np=$3
    shift 3
    local extra=()
    while [ "$1" != -- ]; do
        extra+=("$1")
        shift
    done
    shift
    timeout "${mpi_limit:-600}" env PMIX_MCA_ptl_tcp_remote_connections=1 \
        PMIX_MCA_ptl_tcp_if_include=10.79.99.0/24 OMPI_ALLOW_RUN_AS_ROOT=1 \
        OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 \
        ip netns exec "${host[0]}" "$mpiexec" --allow-run-as-root --oversubscribe --bind-to none \
        "${extra[@]}" -np "$np" "$launcher" "$@" < /dev/null > "$log" 2>&1
}

ucx_env() { # the data interface for pmr's UCX
    export PMR_PROVIDER=ucx UCX_TLS=tcp UCX_NET_DEVICES=$1 PMR_TIMEOUT=${2:-60}
}

echo "netns_hosts: $hosts hosts x $per_host ranks on bridge 10.79.1.0/24 (UCX over TCP on data0)"
failed=0

if phase suite; then
    ucx_env data0
    np=$((hosts * per_host))
    for t in test_exchange test_cartesian test_rails test_collectives test_neighbor; do
        args=()
        launcher=$netns_work/launch
        ranks=$np
        used=$hosts
        if [ "$t" = test_rails ]; then # rails between two ranks (more ranks talk to themselves)
            args=("~[protocol]")
            launcher=$netns_work/launch-pair
            ranks=2
            used=2
        fi
        before=()
        for ((h = 0; h < hosts; ++h)); do before+=("$(tx "$h" data0)"); done
        start=$(date +%s)
        PMR_TEST_RAIL_PROVIDER=ucx netns_run mpi "$netns_work/out" "$launcher" "$ranks" \
            --mca btl self,vader --mca pml ob1 -- "$tests/$t" "${args[@]}"
        rc=$?
        took=$(($(date +%s) - start))
        if [ $rc != 0 ] || ! grep -q "all passed" "$netns_work/out"; then
            tail -40 "$netns_work/out"
            echo "netns_hosts: FAILED: $t on $ranks ranks across $used hosts (exit code $rc)"
            failed=1
            continue
        fi
        sent=""
        for ((h = 0; h < used; ++h)); do
            delta=$(($(tx "$h" data0) - before[h]))
            sent+=" h$h:${delta}B"
            if [ "$delta" -lt 10000 ]; then
                echo "netns_hosts: FAILED: $t: host $h sent only $delta B on data0"
                failed=1
            fi
        done
        echo "netns_hosts: $t on $ranks ranks: passed in $took s; data0 sent$sent"
    done
fi

if phase bench; then
    ucx_env data0
    for kind in pingpong "exchange --periodic"; do
        # shellcheck disable=SC2086 # the benchmark and its options
        netns_run mpi "$netns_work/out" "$netns_work/launch-pair" 2 \
            --mca btl tcp,self --mca btl_tcp_if_include data0 --mca pml ob1 \
            -x PMR_PROVIDER -x UCX_TLS -x UCX_NET_DEVICES -x PMR_TIMEOUT -- \
            "$bench" $kind --provider ucx --variants pmr-owned mpi-persistent \
            --sizes 8 4K 64K 1M --samples 5 --min-time 5 --quiet
        rc=$?
        if [ $rc != 0 ]; then
            tail -40 "$netns_work/out"
            echo "netns_hosts: FAILED: pmr-bench $kind between host 0 and host 1 (exit code $rc)"
            failed=1
            continue
        fi
        echo "netns_hosts: pmr-bench $kind, host 0 <-> host 1 over data0" \
            "(pmr: UCX TCP; MPI: ob1 TCP):"
        cat "$netns_work/out"
    done
fi

wire_pid=""
wire_stop() {
    kill -TERM "$wire_pid" 2> /dev/null
    wait "$wire_pid" 2> /dev/null
    local rest=() pid
    for pid in "${netns_children[@]}"; do
        [ "$pid" = "$wire_pid" ] || rest+=("$pid")
    done
    netns_children=("${rest[@]}")
    wire_pid=""
}
# The faulty wire between hosts 0 and 1, in the switch namespace; arguments: netns-wire.py options.
wire_start() {
    ip netns exec "$sw" python3 "$here/../scripts/netns-wire.py" w0 w1 "$@" 2> "$netns_work/wire" &
    wire_pid=$!
    netns_children+=("$wire_pid")
    for _ in $(seq 50); do # it prints one line once it listens
        [ -s "$netns_work/wire" ] && return 0
        sleep 0.1
    done
    cat "$netns_work/wire"
    netns_fail "the faulty wire did not start"
}

if phase faults; then
    ucx_env wire0
    summary=""
    while IFS='|' read -r name options; do
        [[ "$name" =~ $faults ]] || continue
        # shellcheck disable=SC2086 # options are words
        wire_start $options
        mpi_limit=3600 netns_run mpi "$netns_work/out" "$netns_work/launch-pair" 2 \
            --mca btl self,vader --mca pml ob1 -x PMR_SOAK_ROUNDS="$rounds" -- \
            "$tests/test_soak" "[soak]"
        rc=$?
        wire_stop
        line=$(grep -o "soak: .*" "$netns_work/out")
        frames=$(grep -o "[0-9]* frames, [0-9]* dropped, [0-9]* sent ahead" "$netns_work/wire" |
            awk '{f += $1; d += $3; a += $5}
                 END {print f " frames, " d " dropped, " a " sent ahead"}')
        if [ $rc != 0 ] || ! grep -q "all passed" "$netns_work/out"; then
            tail -40 "$netns_work/out"
            echo "netns_hosts: FAILED: verified rounds under $name (exit code $rc)"
            failed=1
        fi
        if [[ "$options" == *--loss* ]] && [[ "$frames" == *" 0 dropped"* ]]; then
            echo "netns_hosts: FAILED: $name: the wire dropped nothing"
            failed=1
        fi
        rate=$(echo "$line" | grep -o "[0-9]* rounds/s")
        echo "netns_hosts: $name: $line (wire: $frames)"
        summary+=$(printf "\n  %-28s %s" "$name" "${rate:-FAILED}")
    done << EOF
clean wire|
loss 1 %|--loss 1
loss 5 %|--loss 5
delay 1 ms +- 0.5 ms|--delay 1 --jitter 0.5
reorder 25 % (delay 1 ms)|--delay 1 --reorder 25
EOF
    echo "netns_hosts: $rounds verified rounds (test_soak, 2 ranks on 2 hosts) per fault:$summary"
fi

if phase down; then
    ucx_env wire0 "$down_timeout"
    wire_start
    log=$netns_work/down
    : > "$log"
    # At most: start-up, the patience of the test (60 s) and the deadline, then a margin.
    set -m
    mpi_limit=$((down_timeout + 150)) mpi "$log" "$netns_work/launch-pair" 2 --mca btl self,vader \
        --mca pml ob1 -x PMR_SOAK_LINK_DOWN_WAIT=60 -- "$tests/test_soak" "[.link-down]" &
    run=$!
    set +m
    netns_children+=("$run")
    for _ in $(seq 600); do
        [ "$(grep -c "link-down: rank . running" "$log")" = 2 ] && break
        kill -0 "$run" 2> /dev/null || break
        sleep 0.1
    done
    sleep 0.5
    ip -n "${host[1]}" link set wire0 down
    down_at=$(date +%s)
    echo "netns_hosts: host 1's wire0 is down (PMR_TIMEOUT=$down_timeout)"
    wait "$run"
    rc=$?
    ended=$(($(date +%s) - down_at))
    wire_stop
    grep "link-down:" "$log"
    ends=$(grep -cE "link-down: rank . ended in (Timeout|PeerLost)" "$log")
    if [ $rc = 124 ] || [ $rc = 137 ]; then
        tail -40 "$log"
        echo "netns_hosts: FAILED: the ranks hung after the link went down (ended by timeout)"
        failed=1
    elif [ $rc != 0 ] || [ "$ends" != 2 ] || ! grep -q "all passed" "$log"; then
        tail -40 "$log"
        echo "netns_hosts: FAILED: link down: $ends of 2 ranks ended in Timeout or PeerLost" \
            "(exit code $rc)"
        failed=1
    else
        echo "netns_hosts: link down: both ranks ended in Timeout or PeerLost, the run ended" \
            "$ended s after the link went down"
    fi
fi

[ $failed = 0 ] || exit 1
echo "netns_hosts: passed"
