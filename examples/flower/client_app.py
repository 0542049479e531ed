"""The ClientApp: trains on its MNIST partition and, with FedChain on, replies through FedChainClient.

The FedChain part is three lines: build the client from the run config and the wallet key in the SuperNode's
environment (FEDCHAIN_PRIVATE_KEY), and reply with ``client.reply`` instead of the ArrayRecord (the helper
turns the trained model into FedChain's signed update). Joining and withdrawing happen outside the run:
``fedchain flower join`` before the task starts, ``fedchain flower withdraw`` after it ends.
"""

from __future__ import annotations

import logging

from flwr.app import ArrayRecord, Context, Message, MetricRecord, RecordDict
from flwr.clientapp import ClientApp

import mnist_task
from fedchain.flower import FedChainClient

log = logging.getLogger("flwr.fedchain.example")

app = ClientApp()


@app.train()
def train(msg: Message, context: Context) -> Message:
    config, partition = context.run_config, int(context.node_config["partition-id"])
    server_round = int(msg.content["config"]["server-round"])
    images, labels = mnist_task.load_partition(partition, int(config["samples-per-client"]))
    model = mnist_task.make_model()
    model.load_state_dict(msg.content["arrays"].to_torch_state_dict())
    if partition == int(config["free-rider"]):
        loss = 0.0  # trains nothing: the model goes back as it came
        log.info("partition %d round %d: free riding", partition, server_round)
    else:
        epochs, lr = int(config["local-epochs"]), float(config["learning-rate"])
        loss = mnist_task.train(model, images, labels, epochs=epochs, lr=lr, seed=1000 * server_round + partition)
    metrics = {"train-loss": loss}
    if not config["fedchain"]:
        content = RecordDict(
            {
                "arrays": ArrayRecord(torch_state_dict=model.state_dict()),
                "metrics": MetricRecord({"num-examples": len(labels), **metrics}),
            }
        )
        return Message(content=content, reply_to=msg)
    client = FedChainClient.from_env(config, partition=partition)
    reply = client.reply(msg, model.state_dict(), data_size=len(labels), metrics=metrics)
    if partition == int(config.get("lost-reply", -1)) and server_round == 2:
        # The update is committed on chain and in the store; the reply never reaches the server.
        raise RuntimeError(f"partition {partition} round {server_round}: reply lost on purpose")
    return reply
