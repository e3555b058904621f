"""Group coordinator APIs over Kafka's protocol."""


def register_group_apis(apis) -> None:
    pass
