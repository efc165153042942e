# Time-varying path for `drsftp-bench drs --profile` (drsftp-netem profile format), as used by the raw-TCP DRS
# run bench/runs/2026-11-23-4cdadda-drs-lab (recorded there as swing.profile, written out from its report).
# RTT and rate swing every 8 s.
0s rtt=100ms rate=100mbit
8s rtt=200ms rate=50mbit
16s rtt=50ms rate=100mbit
24s rtt=150ms rate=20mbit
repeat 32s
