"""Code that both clients/ and services/ use, as Kafka's clients jar holds `common.record` and
`common.protocol.Errors`: the lab's record batch format, Kafka's v2 record batch codec and the
conversion between them, and the error table."""
