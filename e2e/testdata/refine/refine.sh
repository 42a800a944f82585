#!/bin/sh
# A refinement loop in shell: three drafts of out/report.md, scored
# 0.72, 0.85, 0.83 (or the scores given as arguments), each marked with
# dal-exec iteration ($DAL_EXEC).
set -e
mkdir -p out
i=0
for s in ${@:-0.72 0.85 0.83}; do
  i=$((i + 1))
  printf 'draft %s\n' "$i" > out/report.md
  printf 'notes of draft %s\n' "$i" > out/notes.txt
  "$DAL_EXEC" iteration --score "$s" --note "draft $i" out/ >/dev/null
done
echo "refined $i times"
