# bash's own sources and coreutils date around a sleep, as an agent's shell
# tool runs them. Lines: "<kind> <name> <value>" (see probe.c).
echo "fixed RANDOM $RANDOM $RANDOM"
echo "random SRANDOM $SRANDOM"
echo "fixed EPOCHREALTIME $EPOCHREALTIME"
echo "fixed EPOCHSECONDS $EPOCHSECONDS"
echo "fixed pid $$"
date '+fixed date1 %s.%N'
sleep 2
date '+fixed date2 %s.%N'
