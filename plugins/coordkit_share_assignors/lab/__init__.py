"""``share-groups``: a share group (KIP-932) of real ``ShareConsumer`` processes on ``coordkit
serve``, one strategy per share assignor, or on a real Apache Kafka 4.4 for the reference row.

* :mod:`~coordkit_share_assignors.lab.workload`: the workload, its strategies and its metrics;
* :mod:`~coordkit_share_assignors.lab.run`: one run's processes and events;
* :mod:`~coordkit_share_assignors.lab.analysis`: the processes' logs → steps;
* :mod:`~coordkit_share_assignors.lab.consumer`, :mod:`~.producer`: the programs those processes
  run; the brokers' (coordkit's or Kafka's) are every lab's, :mod:`coordkit.lab.serve_host` and
  :mod:`coordkit.lab.kafka_host`, started by :mod:`coordkit.lab.processes`.
"""
