# Mean GPU SM use from an `nvidia-smi dmon -s u -d 5` log (one device's rows: gpu index, then SM %), and how many of
# the 5-second samples were below 80%: whether a run keeps the GPU busy. `-v name=NAME` prefixes the line.
#   awk [-v name=NAME] -f scripts/device/gpu_use.awk gpu_use.log
$1 ~ /^[0-9]+$/ && $2 ~ /^[0-9]+$/ { n++; s += $2; if ($2 < 80) low++ }
END { if (n) printf "%sGPU SM use: mean %.0f%% over %d samples of 5 s, %d below 80%%\n", (name ? name " " : ""), s / n, n, low }
