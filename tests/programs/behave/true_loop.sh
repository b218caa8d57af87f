#!/bin/bash
# 50 short-lived processes in a row.
for i in $(seq 1 50); do
    /bin/true || exit 1
done
echo "ran /bin/true 50 times"
