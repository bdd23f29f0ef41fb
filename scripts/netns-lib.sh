# shellcheck shell=bash disable=SC2016 # the launcher is written with literal $ for sh
# SPDX-License-Identifier: MIT
# Shared set-up of the network-namespace testbeds (tests/netns_ucx.sh, tests/netns_hosts.sh,
# scripts/netns-rails.sh): emulated hosts are network namespaces, joined by veth pairs directly or
# through bridges in a "switch" namespace; mpirun runs in the first host and a launcher moves every
# rank into its host's namespace (by OMPI_COMM_WORLD_RANK). Everything a script makes is registered
# here and removed on exit, also on interruption (INT, TERM). Source it, then call netns_init.
#
#   . scripts/netns-lib.sh
#   netns_init <name> [tools...]   checks root and tools (exit 77 with the reason: CTest skips),
#                                  sets netns_tag (unique prefix), netns_work (a temporary folder)
#   netns_add <ns>...              new namespaces, loopback up, deleted on exit
#   netns_veth <nsA> <devA> <nsB> <devB>   a veth pair, one end in each namespace, renamed
#   netns_bridge <ns> <bridge>     a bridge (up) in a namespace
#   netns_port <ns> <bridge> <dev> a device of that namespace joins the bridge (up)
#   netns_address <ns> <dev> <cidr>  an address, device up
#   netns_launcher <file> <ranks-per-host> <ns0> <ns1>...  rank r runs in namespace r/ranks-per-host
#                                  (ns0 is where mpirun runs: its ranks are not moved)
#   netns_run <command...>         in the background, waited for: an interrupt reaches the trap at
#                                  once, and the trap ends the command before deleting namespaces
# Bash only; the caller keeps `set -u` if it wants it.

netns_name=netns
netns_tag=""
netns_work=""
netns_spaces=()
netns_children=()

netns_skip() {
    echo "$netns_name: SKIPPED: $*"
    exit 77
}

netns_fail() {
    echo "$netns_name: FAILED: $*"
    exit 1
}

netns_cleanup() {
    trap - EXIT INT TERM
    local pid
    # Commands still running (interrupted): end them, and their process groups, before their
    # namespaces go.
    for pid in "${netns_children[@]}"; do
        kill -TERM -- "-$pid" 2> /dev/null || kill -TERM "$pid" 2> /dev/null
    done
    for pid in "${netns_children[@]}"; do
        wait "$pid" 2> /dev/null
    done
    local ns
    for ns in "${netns_spaces[@]}"; do
        ip netns pids "$ns" 2> /dev/null | xargs -r kill -KILL 2> /dev/null
        ip netns del "$ns" 2> /dev/null
    done
    [ -n "$netns_work" ] && rm -rf "$netns_work"
}

netns_init() {
    netns_name=$1
    shift
    [ "$(id -u)" = 0 ] || netns_skip "needs root to create network namespaces"
    local tool
    for tool in ip "$@"; do
        command -v "$tool" > /dev/null || netns_skip "the tool '$tool' is not installed"
    done
    netns_tag=${netns_tag:-p$$}
    netns_work=$(mktemp -d)
    trap netns_cleanup EXIT
    trap 'exit 130' INT TERM
    ip netns add "${netns_tag}-probe" 2> "$netns_work/err" ||
        netns_skip "cannot create a network namespace: $(cat "$netns_work/err")"
    ip netns del "${netns_tag}-probe"
}

netns_add() {
    local ns
    for ns in "$@"; do
        ip netns add "$ns" 2> "$netns_work/err" ||
            netns_fail "cannot create namespace $ns: $(cat "$netns_work/err")"
        netns_spaces+=("$ns")
        ip -n "$ns" link set lo up
    done
}

# Temporary names in the root namespace are short and unique: veth names have 15 characters at most.
netns_veth_count=0
netns_veth() {
    local a=${netns_tag}v${netns_veth_count}a b=${netns_tag}v${netns_veth_count}b
    netns_veth_count=$((netns_veth_count + 1))
    ip link add name "$a" type veth peer name "$b" 2> "$netns_work/err" ||
        netns_skip "cannot create veth links: $(cat "$netns_work/err")"
    ip link set dev "$a" netns "$1"
    ip link set dev "$b" netns "$3"
    ip -n "$1" link set dev "$a" name "$2"
    ip -n "$3" link set dev "$b" name "$4"
    ip -n "$1" link set dev "$2" up
    ip -n "$3" link set dev "$4" up
}

netns_bridge() {
    ip -n "$1" link add name "$2" type bridge 2> "$netns_work/err" ||
        netns_skip "cannot create a bridge: $(cat "$netns_work/err")"
    ip -n "$1" link set dev "$2" up
}

netns_port() {
    ip -n "$1" link set dev "$3" master "$2" up
}

netns_address() {
    ip -n "$1" addr add "$3" dev "$2"
    ip -n "$1" link set dev "$2" up
}

netns_launcher() {
    local file=$1 per_host=$2
    shift 2
    {
        echo '#!/bin/sh'
        echo "host=\$((OMPI_COMM_WORLD_RANK / $per_host))"
        echo 'case $host in'
        echo '0) exec "$@" ;;'
        local h=1
        for ns in "${@:2}"; do
            echo "$h) exec ip netns exec $ns \"\$@\" ;;"
            h=$((h + 1))
        done
        echo "*) echo \"launcher: rank \$OMPI_COMM_WORLD_RANK has no host\" >&2; exit 1 ;;"
        echo 'esac'
    } > "$file"
    chmod +x "$file"
}

netns_run() {
    set -m # its own process group, so that the trap can end all of it
    "$@" &
    local child=$!
    set +m
    netns_children+=("$child")
    wait "$child"
    local rc=$?
    local rest=() pid
    for pid in "${netns_children[@]}"; do
        [ "$pid" = "$child" ] || rest+=("$pid")
    done
    netns_children=("${rest[@]}")
    return $rc
}
