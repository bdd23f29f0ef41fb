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

[ "$(id -u)" = 0 ] || { echo "netns-rails: needs root"; exit 77; }
command -v tc > /dev/null || { echo "netns-rails: needs tc (iproute2)"; exit 77; }

tag=nr$$
sw=${tag}-sw
hosts=("${tag}-h0" "${tag}-h1")
work=$(mktemp -d)

child=""
cleanup() {
    trap - EXIT INT TERM
    # A run still going (interrupted): end it before its namespaces go.
    [ -n "$child" ] && kill -TERM "$child" 2> /dev/null && wait "$child" 2> /dev/null
    for ns in "${hosts[@]}" "$sw"; do
        ip netns del "$ns" 2> /dev/null
    done
    rm -rf "$work"
}
trap cleanup EXIT
trap 'exit 130' INT TERM

for ns in "$sw" "${hosts[@]}"; do
    ip netns add "$ns" || exit 1
    ip -n "$ns" link set lo up
done

devices=""
for ((k = 0; k < rails; ++k)); do
    ip -n "$sw" link add "br$k" type bridge
    ip -n "$sw" link set "br$k" up
    for h in 0 1; do
        ip link add "${tag}h${h}r$k" type veth peer name "${tag}s${h}r$k" || exit 1
        ip link set "${tag}h${h}r$k" netns "${hosts[h]}"
        ip link set "${tag}s${h}r$k" netns "$sw"
        ip -n "${hosts[h]}" link set "${tag}h${h}r$k" name "rail$k"
        ip -n "${hosts[h]}" addr add "10.78.$((k + 1)).$((h + 1))/24" dev "rail$k"
        ip -n "${hosts[h]}" link set "rail$k" up
        ip -n "$sw" link set "${tag}s${h}r$k" master "br$k" up
        # Egress of the host interface and of the switch port toward it: both directions shaped.
        ip netns exec "${hosts[h]}" tc qdisc add dev "rail$k" root tbf rate "$rate" burst 64kb \
            latency 20ms
        ip netns exec "$sw" tc qdisc add dev "${tag}s${h}r$k" root tbf rate "$rate" burst 64kb \
            latency 20ms
    done
    devices+="${devices:+,}rail$k"
done
# The bootstrap link (PMIx), unshaped.
ip link add "${tag}m0" type veth peer name "${tag}m1"
for h in 0 1; do
    ip link set "${tag}m$h" netns "${hosts[h]}"
    ip -n "${hosts[h]}" link set "${tag}m$h" name boot
    ip -n "${hosts[h]}" addr add "10.78.99.$((h + 1))/24" dev boot
    ip -n "${hosts[h]}" link set boot up
done
if command -v ping > /dev/null; then
    ip netns exec "${hosts[0]}" ping -c 1 -W 2 10.78.1.2 > /dev/null ||
        { echo "netns-rails: FAILED: rail 0 carries no packets"; exit 1; }
fi

cat > "$work/launch" << EOF
#!/bin/sh
[ "\$OMPI_COMM_WORLD_RANK" = 1 ] && exec ip netns exec ${hosts[1]} "\$@"
exec "\$@"
EOF
chmod +x "$work/launch"

run() { # rails for pmr, then pmr-bench arguments
    local n=$1
    shift
    local used=${devices%%,rail${n}*}
    env PMR_PROVIDER=ucx UCX_TLS=tcp PMR_UCX_DEVICES="$used" PMR_TIMEOUT=120 \
        PMIX_MCA_ptl_tcp_remote_connections=1 PMIX_MCA_ptl_tcp_if_include=10.78.99.0/24 \
        timeout 900 ip netns exec "${hosts[0]}" mpiexec --allow-run-as-root --oversubscribe \
        --bind-to none --mca btl tcp,self --mca btl_tcp_if_include "$devices" --mca pml ob1 \
        -x PMR_PROVIDER -x UCX_TLS -x PMR_UCX_DEVICES -x PMR_TIMEOUT \
        -np 2 "$work/launch" "$bench" "$@" &
    # In the background and waited for, so that an interrupt reaches the trap at once.
    child=$!
    wait "$child"
    local rc=$?
    child=""
    return $rc
}

echo "netns-rails: 2 hosts, $rails rails of $rate each way ($devices), MPI over btl tcp on all"
echo "netns-rails: one rail"
run 1 exchange --periodic --variants pmr-owned pmr-direct mpi-persistent "${options[@]}" ||
    { echo "netns-rails: FAILED: the one-rail run"; exit 1; }
echo "netns-rails: $rails rails"
run "$rails" exchange --periodic --variants pmr-direct pmr-split pmr-auto mpi-persistent \
    "${options[@]}" || { echo "netns-rails: FAILED: the $rails-rail run"; exit 1; }
echo "netns-rails: passed"
