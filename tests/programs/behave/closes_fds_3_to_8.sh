#!/bin/bash
# Closes descriptors 3-8 (as scripts that tidy up inherited descriptors do),
# then works a little and prints.
exec 3>&- 4>&- 5>&- 6>&- 7>&- 8>&-
i=0
sum=0
while [ $i -lt 30000 ]; do
    sum=$(( (sum + i * 7) % 1000003 ))
    i=$((i + 1))
done
echo "sum $sum"
echo "done" > done.txt
