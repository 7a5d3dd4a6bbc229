"""An A2A client probe for the A2A profile tests (crates/aip-cli/tests/serve_a2a.rs), built on the
official `a2a-sdk` 1.3.0 client (pinned in .ci/run): it fetches the agent card, builds the SDK's
client from it (JSON-RPC binding, A2A-Version 1.0) and runs the steps it reads on stdin.

Usage: a2a_probe.py BASE_URL [--token TOKEN] [--no-streaming] < steps.json
Each step is {"op": ..., ...}:
  card                                  -> the public card as the SDK parsed it
  extended_card                         -> GetExtendedAgentCard
  send {capability?, data?, text?, message_id?, return_immediately?}
                                        -> every StreamResponse the SDK yields (streaming or not)
  (send also takes metadata {...} merged into the message's, context_id and task_id)
  get {id} / cancel {id} / list {page_size?, context_id?} / subscribe {id}
  push_create {id, url, config_id?, token?, scheme?, credentials?} / push_get {id, config_id}
  push_list {id} / push_delete {id, config_id}
  (send also takes push {url, token?}: a TaskPushNotificationConfig given with the message)
Prints one JSON list with one result per step: {"ok": <value>} or
{"error": <exception class>, "message": ..., "data": ...}. Exit 0, or 2 when the card cannot be
fetched, 3 when it is refused (401).
"""

import argparse
import asyncio
import json
import sys
import uuid

import httpx
from google.protobuf import json_format
from a2a.client import A2ACardResolver, ClientConfig, ClientFactory
from a2a.types.a2a_pb2 import (
    CancelTaskRequest,
    DeleteTaskPushNotificationConfigRequest,
    GetExtendedAgentCardRequest,
    GetTaskPushNotificationConfigRequest,
    GetTaskRequest,
    ListTaskPushNotificationConfigsRequest,
    ListTasksRequest,
    Message,
    Part,
    Role,
    SendMessageRequest,
    SubscribeToTaskRequest,
    TaskPushNotificationConfig,
)


def to_json(message):
    return json_format.MessageToDict(message)


def message(step):
    msg = Message(role=Role.ROLE_USER, message_id=step.get("message_id") or str(uuid.uuid4()))
    if "text" in step:
        msg.parts.append(Part(text=step["text"]))
    if "data" in step:
        part = Part()
        json_format.ParseDict({"data": step["data"]}, part)
        msg.parts.append(part)
    if "capability" in step:
        msg.metadata.update({"aip.capability_id": step["capability"]})
    if "metadata" in step:
        msg.metadata.update(step["metadata"])
    if "context_id" in step:
        msg.context_id = step["context_id"]
    if "task_id" in step:
        msg.task_id = step["task_id"]
    return msg


async def run_step(client, card, step):
    op = step["op"]
    if op == "card":
        return to_json(card)
    if op == "extended_card":
        return to_json(await client.get_extended_agent_card(GetExtendedAgentCardRequest()))
    if op == "send":
        request = SendMessageRequest(message=message(step))
        if step.get("return_immediately"):
            request.configuration.return_immediately = True
        if "push" in step:
            push = request.configuration.task_push_notification_config
            push.url = step["push"]["url"]
            if "token" in step["push"]:
                push.token = step["push"]["token"]
        return [to_json(event) async for event in client.send_message(request)]
    if op == "get":
        return to_json(await client.get_task(GetTaskRequest(id=step["id"])))
    if op == "cancel":
        return to_json(await client.cancel_task(CancelTaskRequest(id=step["id"])))
    if op == "list":
        request = ListTasksRequest()
        if "page_size" in step:
            request.page_size = step["page_size"]
        if "context_id" in step:
            request.context_id = step["context_id"]
        return to_json(await client.list_tasks(request))
    if op == "subscribe":
        events = client.subscribe(SubscribeToTaskRequest(id=step["id"]))
        return [to_json(event) async for event in events]
    if op == "push_create":
        config = TaskPushNotificationConfig(task_id=step["id"], url=step["url"])
        if "config_id" in step:
            config.id = step["config_id"]
        if "token" in step:
            config.token = step["token"]
        if "scheme" in step:
            config.authentication.scheme = step["scheme"]
            config.authentication.credentials = step.get("credentials", "")
        return to_json(await client.create_task_push_notification_config(config))
    if op == "push_get":
        request = GetTaskPushNotificationConfigRequest(task_id=step["id"], id=step["config_id"])
        return to_json(await client.get_task_push_notification_config(request))
    if op == "push_list":
        request = ListTaskPushNotificationConfigsRequest(task_id=step["id"])
        return to_json(await client.list_task_push_notification_configs(request))
    if op == "push_delete":
        request = DeleteTaskPushNotificationConfigRequest(task_id=step["id"], id=step["config_id"])
        await client.delete_task_push_notification_config(request)
        return {}
    raise ValueError(f"unknown op {op}")


async def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("base")
    parser.add_argument("--token")
    parser.add_argument("--no-streaming", action="store_true")
    args = parser.parse_args()
    steps = json.load(sys.stdin)
    headers = {"Authorization": f"Bearer {args.token}"} if args.token else {}
    async with httpx.AsyncClient(headers=headers, timeout=60) as http:
        try:
            card = await A2ACardResolver(http, args.base).get_agent_card()
        except Exception as error:  # the SDK wraps transport and HTTP errors
            print(json.dumps({"card_error": f"{type(error).__name__}: {error}"}))
            return 3 if "401" in str(error) else 2
        config = ClientConfig(httpx_client=http, streaming=not args.no_streaming)
        client = ClientFactory(config).create(card)
        results = []
        for step in steps:
            try:
                results.append({"ok": await run_step(client, card, step)})
            except Exception as error:
                results.append({
                    "error": type(error).__name__,
                    "message": str(getattr(error, "message", error)),
                    "data": getattr(error, "data", None),
                })
        print(json.dumps(results))
        return 0


if __name__ == "__main__":
    sys.exit(asyncio.run(main()))
