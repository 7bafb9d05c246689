#!/bin/bash
V='{"base": {"WITHIN": 0, "INHERIT": false, "TYPE_WEIGHT": 0}, "sub10": {"WITHIN": 10, "INHERIT": false, "TYPE_WEIGHT": 0}, "sub10i": {"WITHIN": 10, "INHERIT": true, "TYPE_WEIGHT": 0}, "t.1": {"WITHIN": 0, "INHERIT": false, "TYPE_WEIGHT": 0.1}, "t.2": {"WITHIN": 0, "INHERIT": false, "TYPE_WEIGHT": 0.2}, "sub10i+t.1": {"WITHIN": 10, "INHERIT": true, "TYPE_WEIGHT": 0.1}}'
for s in examples claude-docs fastapi traefik duckdb chezmoi openshift-4.15; do
  nice /work/main/.venv/bin/python /tmp/x46/quotex.py $s "$V" 2>&1 | grep recall
done
