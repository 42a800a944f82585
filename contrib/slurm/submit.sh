#!/bin/bash
# Submits a dal consistency evaluation to Slurm: a job array of N shards
# (consistency-shards.sbatch) and a merge job that runs once every shard
# succeeded (consistency-merge.sbatch, --dependency=afterok).
#
#   contrib/slurm/submit.sh --shards 10 --results /shared/eval -- \
#     --runs 1000 --seed 7 --label framework=langgraph --label task=codegen -- python3 agent.py
#
# Everything after the first -- goes to dal-exec consistency. --wait blocks
# until the merge job ends and exits with its status. Prints the two job
# IDs. DAL_KEY (default ~/.config/dal/signing.key) must be readable on every
# node: the shards sign with it and the merge trusts it. Extra sbatch
# options (a partition, an account, a time limit) go in SBATCH_* variables
# or --sbatch-arg.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
die() { echo "dal-slurm: $*" >&2; exit 2; }
shards=10 results="" wait=() extra=()
while [ $# -gt 0 ]; do
  case $1 in
    --shards) shards=${2:?}; shift 2 ;;
    --results) results=${2:?}; shift 2 ;;
    --wait) wait=(--wait); shift ;;
    --sbatch-arg) extra+=("${2:?}"); shift 2 ;;
    --) shift; break ;;
    *) die "unknown option $1: use --shards N --results DIR [--wait] [--sbatch-arg ARG] -- CONSISTENCY ARGS" ;;
  esac
done
[ -n "$results" ] || die "give --results DIR, a directory every node can write (the shards and the merged report go there)"
[[ $shards =~ ^[1-9][0-9]*$ ]] || die "--shards $shards is not a positive number"
[ $# -gt 0 ] || die "give dal-exec consistency's arguments after --, e.g. -- --runs 100 --seed 7 -- python3 agent.py"

command -v sbatch >/dev/null || die "sbatch is not on PATH: install Slurm's client commands (Debian: apt-get install slurm-client) or run this on a node that submits jobs"
# A Slurm that authenticates with munge needs munged running here.
if scontrol show config 2>/dev/null | grep -q 'AuthType *= *auth/munge'; then
  command -v munge >/dev/null || die "this Slurm authenticates with munge, which is not installed: install it (Debian: apt-get install munge) and start munged with the cluster's key"
  socket=$(scontrol show config 2>/dev/null | sed -n 's/^AuthInfo *= *.*socket=\([^,]*\).*/\1/p')
  munge -n ${socket:+--socket "$socket"} >/dev/null 2>&1 || die "munge cannot get a credential: start munged (with the cluster's /etc/munge/munge.key) on this machine"
fi

mkdir -p "$results/logs"
results=$(cd "$results" && pwd)
export DAL_RESULTS=$results DAL_SHARDS=$shards
export DAL_KEY=${DAL_KEY:-$HOME/.config/dal/signing.key}
dal_exec=${DAL_EXEC:-dal-exec}
command -v "$dal_exec" >/dev/null || die "$dal_exec is not on PATH: install dal-exec (on every node), or set DAL_EXEC to its path"
# Create the signing key once, before the shards start at the same time.
[ -e "$DAL_KEY" ] || "$dal_exec" keygen --key "$DAL_KEY" >/dev/null

array=$(sbatch --parsable "${extra[@]}" --array="1-$shards" --output="$results/logs/shard-%a.out" \
  "$here/consistency-shards.sbatch" "$@") || die "sbatch refused the shards' job array (its message is above)"
array=${array%%;*}
echo "shards: job $array (array 1-$shards), logs in $results/logs"
merge=$(sbatch --parsable "${extra[@]}" "${wait[@]}" --dependency="afterok:$array" --kill-on-invalid-dep=yes \
  --output="$results/logs/merge.out" "$here/consistency-merge.sbatch") && status=0 || status=$?
merge=${merge%%;*}
echo "merge: job $merge, after every shard succeeded; the report goes to $results/merged"
exit "$status"
