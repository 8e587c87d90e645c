"""aiokafka docs, "Transactional Consume-Process-Produce": read, transform, write and
commit the consumed offsets in one transaction; a failed block is aborted."""

from aiokafka import AIOKafkaConsumer, AIOKafkaProducer, TopicPartition


async def main(bootstrap_servers: str, topic: str) -> None:
    out_topic = topic  # partition 1 is the output, partition 0 the input
    async with AIOKafkaProducer(bootstrap_servers=bootstrap_servers) as plain:
        for i in range(10):
            await plain.send(topic, b"%d" % i, partition=0)

    producer = AIOKafkaProducer(
        bootstrap_servers=bootstrap_servers, transactional_id=topic + "-txn"
    )
    consumer = AIOKafkaConsumer(
        bootstrap_servers=bootstrap_servers,
        group_id=topic + "-eos",
        enable_auto_commit=False,
        auto_offset_reset="earliest",
        isolation_level="read_committed",
    )
    await producer.start()
    await consumer.start()
    tp_in, tp_out = TopicPartition(topic, 0), TopicPartition(out_topic, 1)
    consumer.assign([tp_in])
    try:
        done = 0
        while done < 10:
            batch = await consumer.getmany(tp_in, timeout_ms=5000)
            async with producer.transaction():
                commit_offsets = {}
                for tp, msgs in batch.items():
                    for msg in msgs:
                        await producer.send(out_topic, value=b"out-" + msg.value, partition=1)
                    commit_offsets[tp] = msgs[-1].offset + 1
                    done += len(msgs)
                await producer.send_offsets_to_transaction(commit_offsets, topic + "-eos")
        try:
            async with producer.transaction():
                await producer.send(out_topic, value=b"never", partition=1)
                raise RuntimeError("processing failed")
        except RuntimeError:
            pass
        assert await consumer.committed(tp_in) == 10
    finally:
        await consumer.stop()
        await producer.stop()

    reader = AIOKafkaConsumer(
        bootstrap_servers=bootstrap_servers, isolation_level="read_committed"
    )
    await reader.start()
    try:
        reader.assign([tp_out])
        await reader.seek_to_beginning(tp_out)
        values = []
        while len(values) < 10:
            for msgs in (await reader.getmany(timeout_ms=5000)).values():
                values.extend(m.value for m in msgs)
        assert values == [b"out-%d" % i for i in range(10)]
        assert not await reader.getmany(timeout_ms=1000)  # the aborted one stays hidden
    finally:
        await reader.stop()
