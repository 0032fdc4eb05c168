"""``real-clients``: consumer groups of real client processes on ``coordkit serve``, or on a real
Apache Kafka 4.4 for the reference rows.

* :mod:`~coordkit_assignors.lab.clients.workload`: the workload, its strategies
  (client library x protocol x assignor, ``@kafka`` for Kafka's brokers) and its metrics;
* :mod:`~coordkit_assignors.lab.clients.run`: one run's processes and events;
* :mod:`~coordkit_assignors.lab.clients.analysis`: the processes' logs → steps;
* :mod:`~coordkit_assignors.lab.clients.consumer`, :mod:`~.producer`: the programs those
  processes run; the brokers' (coordkit's or Kafka's) are every lab's, :mod:`coordkit.lab.serve_host`
  and :mod:`coordkit.lab.kafka_host`, started by :mod:`coordkit.lab.processes`.
"""
