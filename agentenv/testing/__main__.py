"""``python -m agentenv.testing``: serve the OpenAI-compatible test server in the foreground.

By default it plays a scripted stand-in model over the builtin tasks (buggy first attempt,
then the fix), so ``agentenv run --policy openai --base-url URL`` works offline end to end.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

from agentenv.testing.chat_server import ChatReply, ChatServer, ScriptedModel


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m agentenv.testing",
        description="Serve an OpenAI-compatible chat-completions endpoint on 127.0.0.1 for tests.")
    parser.add_argument("--port", type=int, default=8000, help="port to listen on (0 = any free port)")
    parser.add_argument("--latency", type=float, default=0.0, help="seconds added to every reply")
    parser.add_argument("--model", default="agentenv-test", help="model id reported by /v1/models")
    parser.add_argument("--tasks", default="builtin",
                        help="task set the scripted model recognises (name or path; default builtin)")
    parser.add_argument("--reads-feedback", action="store_true",
                        help="revise as --policy reader does (the fix likelier the more failures "
                             "the feedback shows) instead of replaying the script")
    parser.add_argument("--responses", type=Path, default=None,
                        help="JSONL file of replies served in order instead: each line a string "
                             "or an object with the fields of ChatReply")
    args = parser.parse_args(argv)
    try:
        if args.responses is not None:
            replies = []
            for line in args.responses.read_text(encoding="utf-8").splitlines():
                if line.strip():
                    item = json.loads(line)
                    replies.append(ChatReply(**item) if isinstance(item, dict) else ChatReply(str(item)))
            server = ChatServer(replies, latency=args.latency, model=args.model, port=args.port)
        else:
            from agentenv.tasks import load_tasks

            model = ScriptedModel(load_tasks(args.tasks), reads_feedback=args.reads_feedback)
            server = ChatServer(model, latency=args.latency,
                                model=args.model, port=args.port)
        server.start()
    except Exception as exc:  # one clear line for a bad flag or file
        print(f"agentenv.testing: error: {exc}", file=sys.stderr)
        return 2
    print(f"serving an OpenAI-compatible endpoint at {server.url} (Ctrl-C to stop)", flush=True)
    try:
        while True:
            time.sleep(3600)
    except KeyboardInterrupt:
        pass
    finally:
        server.stop()
    return 0


if __name__ == "__main__":
    sys.exit(main())
