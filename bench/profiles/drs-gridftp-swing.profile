# Time-varying path for `drsftp-bench gridftp --profile` (drsftp-netem profile format).
# RTT and rate swing every 8 s; the path BDP goes 1.25 MB -> 2.5 MB -> 0.31 MB -> 0.375 MB.
0s rtt=100ms rate=100mbit
8s rtt=200ms rate=100mbit
16s rtt=50ms rate=50mbit
24s rtt=150ms rate=20mbit
repeat 32s
