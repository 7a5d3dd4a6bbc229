"""A remote A2A agent fixture for crates/aip-cli/tests/serve_a2a_remote.rs, built on the official
`a2a-sdk` 1.3.0 server library (pinned in .ci/run): A2A protocol 1.0 over the JSON-RPC binding.

Usage: a2a_remote_agent.py --port PORT --token TOKEN --log FILE [--name NAME]
                           [--cert CERT.pem --key KEY.pem]

Serves the public agent card at GET /.well-known/agent-card.json and the SDK's JSON-RPC endpoint
(DefaultRequestHandler over an InMemoryTaskStore: SendMessage, GetTask, CancelTask, ListTasks...)
at POST /a2a, which requires `Authorization: Bearer TOKEN` (else HTTP 401). Every request to /a2a
is appended to FILE as one JSON line {"method", "authorization", "a2a_version", "params"}.
Prints `READY <port>` once it accepts connections; HTTPS when --cert/--key are given.

The executor picks its behaviour from the message metadata key "skill" (default "echo"):
  echo  completes with an artifact "result": a data part {"echo": <first data part, or
        {"text": <joined text parts>}>, "message_id": <messageId>} and a text part "echoed"
  fail  ends FAILED with the status message "remote failure"
  slow  goes WORKING, waits up to 30 s; CancelTask ends it CANCELED, else it completes like echo
  ask   ends INPUT_REQUIRED with the status message "need more input"
"""

import argparse
import asyncio
import json
import sys

import uvicorn
from google.protobuf import json_format
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse
from starlette.routing import Route

from a2a.helpers import get_data_parts, new_data_part, new_text_message, new_text_part
from a2a.server.agent_execution import AgentExecutor, RequestContext
from a2a.server.events import EventQueue
from a2a.server.request_handlers import DefaultRequestHandler
from a2a.server.routes import create_agent_card_routes, create_jsonrpc_routes
from a2a.server.tasks import InMemoryTaskStore, TaskUpdater
from a2a.types.a2a_pb2 import AgentCard, Task, TaskState, TaskStatus

SKILLS = {
    "echo": "Echoes the message's data (or text) back in an artifact.",
    "fail": "Always fails with 'remote failure'.",
    "slow": "Works for up to 30 seconds; cancelable.",
    "ask": "Asks for more input.",
}


def agent_card(name, url):
    card = {
        "name": name,
        "description": "Remote A2A test agent (a2a-sdk 1.3.0) for the aip-cli interop tests.",
        "version": "1.0.0",
        "supportedInterfaces": [{"url": url, "protocolBinding": "JSONRPC", "protocolVersion": "1.0"}],
        "capabilities": {"streaming": False, "pushNotifications": False},
        "securitySchemes": {"bearer": {"httpAuthSecurityScheme": {"scheme": "Bearer"}}},
        "securityRequirements": [{"schemes": {"bearer": {"list": []}}}],
        "defaultInputModes": ["application/json", "text/plain"],
        "defaultOutputModes": ["application/json", "text/plain"],
        "skills": [
            {"id": id_, "name": id_, "description": text, "tags": ["test"]}
            for id_, text in SKILLS.items()
        ],
    }
    return json_format.ParseDict(card, AgentCard())


class RemoteTestExecutor(AgentExecutor):
    def __init__(self):
        self.cancelled = {}  # task id -> asyncio.Event, for running `slow` tasks

    async def execute(self, context: RequestContext, event_queue: EventQueue) -> None:
        message = context.message
        skill = json_format.MessageToDict(message.metadata).get("skill") or "echo"
        updater = TaskUpdater(event_queue, context.task_id, context.context_id)
        if context.current_task is None:
            # The SDK wants a Task event before any status update; a `slow` task starts WORKING
            # so that returnImmediately hands it back in that state.
            state = TaskState.TASK_STATE_WORKING if skill == "slow" else TaskState.TASK_STATE_SUBMITTED
            task = Task(id=context.task_id, context_id=context.context_id,
                        status=TaskStatus(state=state), history=[message])
            task.status.timestamp.GetCurrentTime()
            await event_queue.enqueue_event(task)

        def status_text(text):
            return new_text_message(text, context_id=context.context_id, task_id=context.task_id)

        if skill == "fail":
            await updater.failed(status_text("remote failure"))
        elif skill == "ask":
            await updater.requires_input(status_text("need more input"))
        elif skill == "slow":
            cancelled = self.cancelled.setdefault(context.task_id, asyncio.Event())
            # How long it runs: the first data part's "seconds" (default 30).
            data = get_data_parts(message.parts)
            seconds = float((data[0] if data else {}).get("seconds", 30))
            try:
                await asyncio.wait_for(cancelled.wait(), timeout=seconds)
                return  # cancel() already published CANCELED
            except asyncio.TimeoutError:
                await self.echo(context, updater)
            finally:
                self.cancelled.pop(context.task_id, None)
        else:
            await self.echo(context, updater)

    async def echo(self, context, updater):
        message = context.message
        data = get_data_parts(message.parts)
        echoed = data[0] if data else {"text": context.get_user_input()}
        await updater.add_artifact(
            [new_data_part({"echo": echoed, "message_id": message.message_id}), new_text_part("echoed")],
            name="result",
        )
        await updater.complete()

    async def cancel(self, context: RequestContext, event_queue: EventQueue) -> None:
        if context.task_id in self.cancelled:
            self.cancelled[context.task_id].set()
        await TaskUpdater(event_queue, context.task_id, context.context_id).cancel()


def build_app(args, url):
    card = agent_card(args.name, url)
    handler = DefaultRequestHandler(
        agent_executor=RemoteTestExecutor(), task_store=InMemoryTaskStore(), agent_card=card
    )
    rpc = create_jsonrpc_routes(handler, "/a2a")[0].endpoint
    log = open(args.log, "a", encoding="utf-8")

    async def a2a_endpoint(request: Request):
        authorization = request.headers.get("authorization")
        try:
            body = json.loads(await request.body())  # cached: the SDK reads it again
        except ValueError:
            body = None
        body = body if isinstance(body, dict) else {}
        log.write(json.dumps({
            "method": body.get("method"),
            "authorization": authorization,
            "a2a_version": request.headers.get("a2a-version"),
            "params": body.get("params"),
        }) + "\n")
        log.flush()
        if authorization != f"Bearer {args.token}":
            return JSONResponse({"error": "unauthorized"}, status_code=401,
                                headers={"WWW-Authenticate": "Bearer"})
        return await rpc(request)

    routes = create_agent_card_routes(card) + [Route("/a2a", a2a_endpoint, methods=["POST"])]
    return Starlette(routes=routes), handler


async def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--port", type=int, required=True)
    parser.add_argument("--token", required=True)
    parser.add_argument("--log", required=True)
    parser.add_argument("--name", default="Remote Test Agent")
    parser.add_argument("--cert")
    parser.add_argument("--key")
    args = parser.parse_args()
    if bool(args.cert) != bool(args.key):
        parser.error("--cert and --key go together")
    tls = bool(args.cert)
    url = f"{'https' if tls else 'http'}://127.0.0.1:{args.port}/a2a"
    app, handler = build_app(args, url)
    config = uvicorn.Config(app, host="127.0.0.1", port=args.port, log_level="warning",
                            ssl_certfile=args.cert if tls else None,
                            ssl_keyfile=args.key if tls else None)
    server = uvicorn.Server(config)

    async def serve():
        try:
            await server.serve()
        except (SystemExit, Exception) as exc:  # uvicorn sys.exit()s when it cannot bind
            return exc

    serving = asyncio.create_task(serve())
    while not server.started:
        if serving.done():
            sys.exit(f"a2a_remote_agent: cannot serve on 127.0.0.1:{args.port}: {serving.result()!r}")
        await asyncio.sleep(0.02)
    print(f"READY {args.port}", flush=True)
    await serving
    await handler.aclose()


if __name__ == "__main__":
    asyncio.run(main())
