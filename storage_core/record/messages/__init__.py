"""Kafka's generated messages as data, and the records of Kafka's internal topics decoded with them.

- :mod:`.schema`: the shape of a message definition (fields, versions, tags);
- :mod:`.codec`: the encoding rules, interpreting a definition over bytes into Kafka's JSON;
- :mod:`.coordinator`, :mod:`.metadata`, :mod:`.clients`: the tables, one module per family;
- :mod:`.decoders`: the framing of each internal topic and the JSON kafka-dump-log prints.
"""
