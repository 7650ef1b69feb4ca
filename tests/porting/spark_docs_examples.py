"""The Python examples of Spark's *Structured Streaming + Kafka Integration Guide* (Spark 4.x,
``docs/streaming/structured-streaming-kafka-integration.md``), copied verbatim, and what porting
one to klog changes: ``format("kafka")`` becomes ``format("klog")`` and ``load()``/``save()``/
``start()`` get a path. :func:`port` does exactly that and nothing else; ``test_porting.py``
runs every example ported and checks the rows against the data it wrote.
"""

from __future__ import annotations

import re

STREAM_SOURCES = {
    "subscribe one topic": '''
# Subscribe to 1 topic
df = spark \\
  .readStream \\
  .format("kafka") \\
  .option("kafka.bootstrap.servers", "host1:port1,host2:port2") \\
  .option("subscribe", "topic1") \\
  .load()
df.selectExpr("CAST(key AS STRING)", "CAST(value AS STRING)")
''',
    "subscribe one topic, with headers": '''
# Subscribe to 1 topic, with headers
df = spark \\
  .readStream \\
  .format("kafka") \\
  .option("kafka.bootstrap.servers", "host1:port1,host2:port2") \\
  .option("subscribe", "topic1") \\
  .option("includeHeaders", "true") \\
  .load()
df.selectExpr("CAST(key AS STRING)", "CAST(value AS STRING)", "headers")
''',
    "subscribe multiple topics": '''
# Subscribe to multiple topics
df = spark \\
  .readStream \\
  .format("kafka") \\
  .option("kafka.bootstrap.servers", "host1:port1,host2:port2") \\
  .option("subscribe", "topic1,topic2") \\
  .load()
df.selectExpr("CAST(key AS STRING)", "CAST(value AS STRING)")
''',
    "subscribe a pattern": '''
# Subscribe to a pattern
df = spark \\
  .readStream \\
  .format("kafka") \\
  .option("kafka.bootstrap.servers", "host1:port1,host2:port2") \\
  .option("subscribePattern", "topic.*") \\
  .load()
df.selectExpr("CAST(key AS STRING)", "CAST(value AS STRING)")
''',
}

BATCH_SOURCES = {
    "one topic, earliest to latest": '''
# Subscribe to 1 topic defaults to the earliest and latest offsets
df = spark \\
  .read \\
  .format("kafka") \\
  .option("kafka.bootstrap.servers", "host1:port1,host2:port2") \\
  .option("subscribe", "topic1") \\
  .load()
df.selectExpr("CAST(key AS STRING)", "CAST(value AS STRING)")
''',
    "multiple topics, explicit offsets": '''
# Subscribe to multiple topics, specifying explicit Kafka offsets
df = spark \\
  .read \\
  .format("kafka") \\
  .option("kafka.bootstrap.servers", "host1:port1,host2:port2") \\
  .option("subscribe", "topic1,topic2") \\
  .option("startingOffsets", """{"topic1":{"0":23,"1":-2},"topic2":{"0":-2}}""") \\
  .option("endingOffsets", """{"topic1":{"0":50,"1":-1},"topic2":{"0":-1}}""") \\
  .load()
df.selectExpr("CAST(key AS STRING)", "CAST(value AS STRING)")
''',
    "a pattern, earliest to latest": '''
# Subscribe to a pattern, at the earliest and latest offsets
df = spark \\
  .read \\
  .format("kafka") \\
  .option("kafka.bootstrap.servers", "host1:port1,host2:port2") \\
  .option("subscribePattern", "topic.*") \\
  .option("startingOffsets", "earliest") \\
  .option("endingOffsets", "latest") \\
  .load()
df.selectExpr("CAST(key AS STRING)", "CAST(value AS STRING)")
''',
}

STREAM_SINKS = {
    "stream to a topic given as an option": '''
# Write key-value data from a DataFrame to a specific Kafka topic specified in an option
ds = df \\
  .selectExpr("CAST(key AS STRING)", "CAST(value AS STRING)") \\
  .writeStream \\
  .format("kafka") \\
  .option("kafka.bootstrap.servers", "host1:port1,host2:port2") \\
  .option("topic", "topic1") \\
  .start()
''',
    "stream to the topic in the data": '''
# Write key-value data from a DataFrame to Kafka using a topic specified in the data
ds = df \\
  .selectExpr("topic", "CAST(key AS STRING)", "CAST(value AS STRING)") \\
  .writeStream \\
  .format("kafka") \\
  .option("kafka.bootstrap.servers", "host1:port1,host2:port2") \\
  .start()
''',
}

BATCH_SINKS = {
    "write to a topic given as an option": '''
# Write key-value data from a DataFrame to a specific Kafka topic specified in an option
df.selectExpr("CAST(key AS STRING)", "CAST(value AS STRING)") \\
  .write \\
  .format("kafka") \\
  .option("kafka.bootstrap.servers", "host1:port1,host2:port2") \\
  .option("topic", "topic1") \\
  .save()
''',
    "write to the topic in the data": '''
# Write key-value data from a DataFrame to Kafka using a topic specified in the data
df.selectExpr("topic", "CAST(key AS STRING)", "CAST(value AS STRING)") \\
  .write \\
  .format("kafka") \\
  .option("kafka.bootstrap.servers", "host1:port1,host2:port2") \\
  .save()
''',
}


def port(example: str, path_variable: str) -> str:
    """The example as a klog job: the format's name, and the path (a variable) where Kafka needs none.

    A batch write also says ``.mode("append")``: PySpark runs Python data sources only in append
    or overwrite mode and refuses the default, ``errorifexists``, before klog is called (Spark's
    Kafka sink treats that default as append)."""
    ported, n = re.subn(r'\.format\("kafka"\)', '.format("klog")', example)
    assert n == 1, example
    ported = ported.replace(".write \\\n", '.write.mode("append") \\\n')
    ported, n = re.subn(r"\.(load|save|start)\(\)", rf".\1({path_variable})", ported)
    assert n == 1, example
    return ported
