"""The analysis pipeline: many chaos runs in, an anomaly matrix out (`eoslab analyze`, `eoslab sweep`).

Guarantees: the verdict of every run comes from `checker.kafka.check_kafka`,
the function `eoslab check --model kafka` runs, applied by Spark executors
to each run's ops (one run per call, because some analyses — G0/G1c cycles,
lost-write's must-have-committed, pid-reuse, zombie-write — span
partitions); nothing here re-implements an anomaly rule. Modules:

  store      finds the runs under a store (run.json + history.jsonl each)
  executors  what executors run: each history read once -> its Parquet,
             its verdict and its row
  latency    client-op latency histograms that add up across runs
  session    the SparkSession (local or standalone) and the progress line
  jvm_cds    the class-data-sharing archive a local driver's JVM starts from
  matrix     per workload x configuration x fault package x Kafka version:
             counts, rates, Wilson intervals, unseen, latency and real-time
             lag summaries
  html       DIR/index.html: heat maps (inline SVG) and links to the runs
  job        `eoslab analyze` end to end
  sweep      `eoslab sweep`: the chaos runs a settings matrix needs
  synth      synthetic runs with known anomalies (tests, benchmark)
"""
