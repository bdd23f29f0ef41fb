#!/bin/bash
# SPDX-License-Identifier: MIT
# A multi-NIC testbed in network namespaces: two emulated hosts, each with N interfaces, interface k
# of every host on bridge k (one bridge per rail, in a "switch" namespace), every interface's
# egress shaped by tc (token bucket, RATE per interface) so that links, not the CPUs, bound the
# transfer. One rank per host runs pmr-bench exchange with the UCX provider and one rail per
# interface (PMR_UCX_DEVICES), the neighbour exchange's direct and split against each other and
# against Open MPI's TCP transport over all interfaces (which stripes messages across them).
#
#   usage: scripts/netns-rails.sh <pmr-bench> [rails=4] [rate=300mbit] [pmr-bench options...]
#
# Needs root, iproute2 and Open MPI. Everything lives in the namespaces this script creates and
# deletes on exit, also when interrupted (addresses 10.78.x.y exist only inside them). MPI's own
# bootstrap (PMIx) gets a link of its own that is not shaped and carries no benchmark data.
set -u

bench=${1:?usage: netns-rails.sh <pmr-bench> [rails] [rate] [options...]}
rails=${2:-4}
rate=${3:-300mbit}
shift $(($# < 3 ? $# : 3))
options=("$@")
[ ${#options[@]} -gt 0 ] || options=(--sizes 16K 64K 256K 1M 4M --samples 7 --min-time 20)

# shellcheck source=netns-lib.sh
. "$(cd "$(dirname "$0")" && pwd)/netns-lib.sh"
netns_init netns-rails tc
sw=${netns_tag}-sw
hosts=("${netns_tag}-h0" "${netns_tag}-h1")
work=$netns_work
netns_add "$sw" "${hosts[@]}"

devices=""
for ((k = 0; k < rails; ++k)); do
    netns_bridge "$sw" "br$k"
    for h in 0 1; do
        netns_veth "${hosts[h]}" "rail$k" "$sw" "s${h}r$k"
        netns_address "${hosts[h]}" "rail$k" "10.78.$((k + 1)).$((h + 1))/24"
        netns_port "$sw" "br$k" "s${h}r$k"
        # Egress of the host interface and of the switch port toward it: both directions shaped.
        ip netns exec "${hosts[h]}" tc qdisc add dev "rail$k" root tbf rate "$rate" burst 64kb \
            latency 20ms
        ip netns exec "$sw" tc qdisc add dev "s${h}r$k" root tbf rate "$rate" burst 64kb \
            latency 20ms
    done
    devices+="${devices:+,}rail$k"
done
# The bootstrap link (PMIx), unshaped.
netns_veth "${hosts[0]}" boot "${hosts[1]}" boot
netns_address "${hosts[0]}" boot 10.78.99.1/24
netns_address "${hosts[1]}" boot 10.78.99.2/24
if command -v ping > /dev/null; then
    ip netns exec "${hosts[0]}" ping -c 1 -W 2 10.78.1.2 > /dev/null ||
        { echo "netns-rails: FAILED: rail 0 carries no packets"; exit 1; }
fi

netns_launcher "$work/launch" 1 "${hosts[@]}"

run() { # rails for pmr, then pmr-bench arguments
    local n=$1
    shift
    local used=${devices%%,rail${n}*}
    netns_run env PMR_PROVIDER=ucx UCX_TLS=tcp PMR_UCX_DEVICES="$used" PMR_TIMEOUT=120 \
        PMIX_MCA_ptl_tcp_remote_connections=1 PMIX_MCA_ptl_tcp_if_include=10.78.99.0/24 \
        timeout 900 ip netns exec "${hosts[0]}" mpiexec --allow-run-as-root --oversubscribe \
        --bind-to none --mca btl tcp,self --mca btl_tcp_if_include "$devices" --mca pml ob1 \
        -x PMR_PROVIDER -x UCX_TLS -x PMR_UCX_DEVICES -x PMR_TIMEOUT \
        -np 2 "$work/launch" "$bench" "$@"
}

echo "netns-rails: 2 hosts, $rails rails of $rate each way ($devices), MPI over btl tcp on all"
echo "netns-rails: one rail"
run 1 exchange --periodic --variants pmr-owned pmr-direct mpi-persistent "${options[@]}" ||
    { echo "netns-rails: FAILED: the one-rail run"; exit 1; }
echo "netns-rails: $rails rails"
run "$rails" exchange --periodic --variants pmr-direct pmr-split pmr-auto mpi-persistent \
    "${options[@]}" || { echo "netns-rails: FAILED: the $rails-rail run"; exit 1; }
echo "netns-rails: passed"
