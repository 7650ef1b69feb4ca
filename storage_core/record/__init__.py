"""Record formats: batches, records, codecs, walking a .log, batches to and from Arrow."""
