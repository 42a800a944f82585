# The machine's figures — uptime, load, boot time, memory — which strict
# mode makes the virtual machine's: procps uptime and free, /proc/stat's
# btime and /proc/meminfo, and whether the boot time /proc/stat gives is
# the one uptime -s computes from the clock and /proc/uptime.
export TZ=UTC0
echo "fixed uptime $(uptime)"
echo "fixed uptime_since $(uptime -s)"
btime=$(awk '/^btime/ { print $2 }' /proc/stat)
echo "fixed btime $btime"
echo "fixed boot_agrees $([ "$(date -d "@$btime" '+%F %T')" = "$(uptime -s)" ] && echo yes || echo no)"
echo "fixed free $(free | sed -n 2p)"
echo "fixed meminfo $(grep -E '^Mem(Total|Free|Available):' /proc/meminfo | tr -s ' ' | tr '\n' ' ')"
