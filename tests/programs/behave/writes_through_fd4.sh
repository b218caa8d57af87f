#!/bin/bash
# Writes 200 lines to out.txt through descriptor 4, then burns CPU.
exec 4>out.txt
for i in $(seq 1 200); do
    echo line $i >&4
done
i=0
while [ $i -lt 60000 ]; do
    i=$((i + 1))
done
echo "loop $i"
