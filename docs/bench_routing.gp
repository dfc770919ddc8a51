set terminal pngcairo size 1260,460 noenhanced
set output 'docs/bench_routing.png'
set style data histograms
set style histogram clustered gap 1
set style fill solid 0.85 border -1
set yrange [0:100]
set ylabel 'engine prefix-cache hit ratio (%)'
set grid ytics
set key top left font ',8'
set multiplot layout 1,3 title 'bench_routing: hit ratio per policy (4 pods x DP 2, 2048 blocks a rank, penalty 512)'
$d0 << EOD
workload random rr blind exact pending-racing pending oracle bound
conversation 13.35 10.26 8.37 8.37 8.37 8.37 8.37 31.47
arxiv 12.42 11.75 27.64 29.24 28.57 29.24 29.24 29.24
bursts 37.97 26.83 85.78 85.78 85.78 85.78 85.78 85.78
EOD
set title '1 router client'
plot $d0 using 2:xtic(1) title columnhead, '' using 3 title columnhead, '' using 4 title columnhead, '' using 5 title columnhead, '' using 6 title columnhead, '' using 7 title columnhead, '' using 8 title columnhead, '' using 9 title columnhead
$d1 << EOD
workload random rr blind exact pending-racing pending oracle bound
conversation 6.80 8.55 11.04 20.86 20.79 22.08 20.83 31.49
arxiv 26.90 28.84 32.55 35.33 35.21 36.19 35.99 36.36
bursts 25.02 24.91 53.51 31.16 56.63 71.98 71.84 85.33
EOD
set title '8 router clients'
plot $d1 using 2:xtic(1) title columnhead, '' using 3 title columnhead, '' using 4 title columnhead, '' using 5 title columnhead, '' using 6 title columnhead, '' using 7 title columnhead, '' using 8 title columnhead, '' using 9 title columnhead
$d2 << EOD
workload random rr blind exact pending-racing pending oracle bound
conversation 8.17 5.68 8.31 19.24 20.50 21.31 22.18 31.49
arxiv 27.38 28.34 33.07 34.74 35.18 36.16 35.99 36.36
bursts 27.85 25.72 52.83 33.90 57.13 71.65 71.48 85.33
EOD
set title '32 router clients'
plot $d2 using 2:xtic(1) title columnhead, '' using 3 title columnhead, '' using 4 title columnhead, '' using 5 title columnhead, '' using 6 title columnhead, '' using 7 title columnhead, '' using 8 title columnhead, '' using 9 title columnhead
unset multiplot
