# tests/common/tcp_ports.sh — TCP ports for the tests that start torchrun-style jobs (sourced).
#
#   tcp_listening PORT        is a socket listening on PORT?
#   tcp_port_in_use PORT      is any socket, in any state, bound to PORT?
#   free_tcp_ports COUNT      prints P such that P .. P+COUNT-1 are all free: 2 for MASTER_PORT and
#                             the port of the hub aperture's rank 0 opens on MASTER_PORT+1, more
#                             for a test that also holds the ports after it
#
# The ports are taken below Linux's ephemeral range (ip_local_port_range), where the kernel picks the
# local ports of outgoing connections: a port in that range can be taken by any connecting client
# at any moment (every rank of these tests connects to a hub), and bind() then fails even with
# SO_REUSEADDR. Below it, only a listener could take the port, and none does when we look.

tcp_port_state_is() {  # tcp_port_state_is PORT STATE_REGEX
  awk -v p=":$(printf '%04X' "$1")" -v s="$2" '$2 ~ p"$" && $4 ~ s { f = 1 } END { exit !f }' \
    /proc/net/tcp /proc/net/tcp6 2>/dev/null
}
tcp_listening() { tcp_port_state_is "$1" '^0A$'; }
tcp_port_in_use() { tcp_port_state_is "$1" '.'; }

free_tcp_ports() {
  local count=$1 low=20000 high port tries i
  high=$(awk '{ print $1 }' /proc/sys/net/ipv4/ip_local_port_range 2>/dev/null)
  [[ $high =~ ^[0-9]+$ ]] && (( high > low + 1000 )) || high=30000
  for ((tries = 0; tries < 1000; tries++)); do
    port=$(( low + (RANDOM * 32768 + RANDOM) % (high - low - count) ))
    for ((i = 0; i < count; i++)); do tcp_port_in_use $((port + i)) && break; done
    if (( i == count )); then
      echo "$port"
      return 0
    fi
  done
  echo "free_tcp_ports: no $count free ports in a row in $low..$high" >&2
  return 1
}
