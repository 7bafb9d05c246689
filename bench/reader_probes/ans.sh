#!/bin/bash
# usage: ans.sh ROOT TAG
cd $1
for s in claude-docs openshift-4.15 examples fastapi traefik duckdb chezmoi; do
  case $s in
    claude-docs) a="/work/shared/eval/claude-docs";;
    openshift-4.15) a="/work/shared/eval/openshift-4.15 --limit 100 --seed 0";;
    examples) a="/work/main/examples";;
    *) a="/work/main/bench/sets/$s";;
  esac
  nice /work/main/.venv/bin/python -m bot.cli eval $a --db /work/main/.fieldguide/eval/$s-local-all-MiniLM-L6-v2-int8.db --answers --output /tmp/x45/ans-$2-$s.json > /tmp/x45/ans-$2-$s.log 2>&1
  echo "$s done $(date +%T)"
done
