#!/usr/bin/env python3
"""A scripted fake LLM provider for the tests: a real HTTP/1.1 server on
loopback that answers the Anthropic Messages, OpenAI Chat Completions,
OpenAI Responses and Gemini generateContent protocols, streaming or not,
from a neutral script. See README.md next to this file for the contract.

Usage: fakeprov.py --script SCRIPT.json --log LOG.ndjson --port-file FILE [--port 0] [--watch-pid PID]

Python 3 standard library only. Stops on SIGTERM or SIGINT.
"""

import argparse
import json
import os
import re
import signal
import socket
import struct
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from urllib.parse import urlsplit, parse_qs

CREATED = 1700000000  # a fixed timestamp keeps the output reproducible


def dumps(obj):
    """Compact JSON, the way the providers send it."""
    return json.dumps(obj, separators=(",", ":"), ensure_ascii=False)


def pieces(text, size=None):
    """Splits text into stream deltas: words with their trailing spaces,
    or fixed-size slices when size is given. Never returns an empty list
    for a non-empty string; returns [] for an empty one."""
    if not text:
        return []
    if size:
        return [text[i:i + size] for i in range(0, len(text), size)]
    return re.findall(r"\s*\S+\s*|\s+", text) or [text]


# ---------------------------------------------------------------- the script

class Step:
    """One scripted answer, in neutral terms."""

    def __init__(self, raw, index):
        self.raw = raw
        self.index = index
        self.text = raw.get("text", "")
        self.tool_calls = raw.get("tool_calls", [])
        self.reasoning = raw.get("reasoning_text", "")
        self.stop = raw.get("stop") or ("tool_use" if self.tool_calls else "end_turn")
        u = raw.get("usage")
        if u is None:
            u = {"input": 10, "output": 5}
        self.u = {k: int(u.get(k, 0)) for k in
                  ("input", "cache_read", "cache_write", "cache_write_1h", "output", "reasoning")}
        self.model = raw.get("model")
        self.delta_size = raw.get("delta_size")

    def get(self, key, default=None):
        return self.raw.get(key, default)

    def args_json(self, call):
        """A tool call's input as the JSON text the providers stream."""
        if "arguments" in call:  # verbatim arguments text (may be invalid JSON)
            return call["arguments"]
        return dumps(call.get("input", {}))


class Script:
    def __init__(self, path):
        with open(path, encoding="utf-8") as f:
            data = json.load(f)
        self.steps = [Step(s, i) for i, s in enumerate(data.get("responses", []))]
        self.require_auth = data.get("require_auth", True)
        self.next = 0
        self.lock = threading.Lock()

    def take(self):
        with self.lock:
            if self.next >= len(self.steps):
                self.next += 1
                return None
            s = self.steps[self.next]
            self.next += 1
            return s


class Log:
    def __init__(self, path):
        self.f = open(path, "a", encoding="utf-8")
        self.n = 0
        self.lock = threading.Lock()

    def write(self, rec_fn):
        with self.lock:
            self.n += 1
            rec = rec_fn(self.n)
            self.f.write(dumps(rec) + "\n")
            self.f.flush()
            return self.n


# ------------------------------------------------------ usage per convention

def usage_anthropic(u, final=True):
    cw = u["cache_write"] + u["cache_write_1h"]
    out = {
        "input_tokens": u["input"],
        "cache_creation_input_tokens": cw,
        "cache_read_input_tokens": u["cache_read"],
        "cache_creation": {
            "ephemeral_5m_input_tokens": u["cache_write"],
            "ephemeral_1h_input_tokens": u["cache_write_1h"],
        },
        # message_start carries a provisional output count; the cumulative
        # total arrives in message_delta.
        "output_tokens": u["output"] if final else min(1, u["output"]),
        "service_tier": "standard",
    }
    if final and u["reasoning"]:
        out["output_tokens_details"] = {"thinking_tokens": u["reasoning"]}
    return out


def usage_anthropic_delta(u):
    return {
        "input_tokens": u["input"],
        "cache_creation_input_tokens": u["cache_write"] + u["cache_write_1h"],
        "cache_read_input_tokens": u["cache_read"],
        "output_tokens": u["output"],
        **({"output_tokens_details": {"thinking_tokens": u["reasoning"]}} if u["reasoning"] else {}),
    }


def usage_chat(u):
    cw = u["cache_write"] + u["cache_write_1h"]
    prompt = u["input"] + u["cache_read"] + cw
    ptd = {"cached_tokens": u["cache_read"], "audio_tokens": 0}
    if cw:
        ptd["cache_write_tokens"] = cw
    return {
        "prompt_tokens": prompt,
        "completion_tokens": u["output"],
        "total_tokens": prompt + u["output"],
        "prompt_tokens_details": ptd,
        "completion_tokens_details": {
            "reasoning_tokens": u["reasoning"],
            "audio_tokens": 0,
            "accepted_prediction_tokens": 0,
            "rejected_prediction_tokens": 0,
        },
    }


def usage_responses(u):
    cw = u["cache_write"] + u["cache_write_1h"]
    inp = u["input"] + u["cache_read"] + cw
    return {
        "input_tokens": inp,
        "input_tokens_details": {"cached_tokens": u["cache_read"], "cache_write_tokens": cw},
        "output_tokens": u["output"],
        "output_tokens_details": {"reasoning_tokens": u["reasoning"]},
        "total_tokens": inp + u["output"],
    }


def usage_gemini(u, done=1, of=1):
    """Gemini's usageMetadata. Every streamed chunk carries one, each a
    running total for the call (the last one is the call's usage; summing
    them is wrong): done/of says how far through the answer the chunk is."""
    prompt = u["input"] + u["cache_read"]
    cand = (u["output"] - u["reasoning"]) * done // of
    meta = {"promptTokenCount": prompt, "candidatesTokenCount": cand,
            "totalTokenCount": prompt + cand + u["reasoning"]}
    if u["cache_read"]:
        meta["cachedContentTokenCount"] = u["cache_read"]
    meta["promptTokensDetails"] = [{"modality": "TEXT", "tokenCount": prompt}]
    if u["cache_read"]:
        meta["cacheTokensDetails"] = [{"modality": "TEXT", "tokenCount": u["cache_read"]}]
    if u["reasoning"]:
        meta["thoughtsTokenCount"] = u["reasoning"]
    return meta


# ------------------------------------------------- error bodies per protocol

ANTHROPIC_ERR = {400: "invalid_request_error", 401: "authentication_error",
                 403: "permission_error", 404: "not_found_error",
                 413: "request_too_large", 429: "rate_limit_error",
                 500: "api_error", 529: "overloaded_error"}
OPENAI_ERR = {400: ("invalid_request_error", None), 401: ("invalid_request_error", "invalid_api_key"),
              404: ("invalid_request_error", "model_not_found"),
              429: ("requests", "rate_limit_exceeded"), 500: ("server_error", None),
              503: ("server_error", None)}
GEMINI_STATUS = {400: "INVALID_ARGUMENT", 401: "UNAUTHENTICATED", 403: "PERMISSION_DENIED",
                 404: "NOT_FOUND", 429: "RESOURCE_EXHAUSTED", 500: "INTERNAL",
                 503: "UNAVAILABLE", 504: "DEADLINE_EXCEEDED"}


def error_body(proto, status, message=None):
    if proto == "anthropic":
        t = ANTHROPIC_ERR.get(status, "api_error")
        return {"type": "error",
                "error": {"type": t, "message": message or t.replace("_", " ")},
                "request_id": "req_fake"}
    if proto == "gemini":
        return {"error": {"code": status, "message": message or "fake provider error",
                          "status": GEMINI_STATUS.get(status, "UNKNOWN")}}
    t, code = OPENAI_ERR.get(status, ("server_error", None))
    return {"error": {"message": message or "fake provider error", "type": t,
                      "param": None, "code": code}}


# ------------------------------------------------------------------ renderers
# Each renderer returns (events, final_json). events is a list of
# (event_name_or_None, data_text, kind) where kind tags usage/terminal events.

def stop_chat(step):
    return {"end_turn": "stop", "tool_use": "tool_calls", "max_tokens": "length",
            "stop_sequence": "stop"}.get(step.stop, step.stop)


def stop_gemini(step):
    return {"end_turn": "STOP", "tool_use": "STOP", "max_tokens": "MAX_TOKENS",
            "stop_sequence": "STOP"}.get(step.stop, step.stop)


class Anthropic:
    name = "anthropic"

    @staticmethod
    def message(step, model, rid, final, content):
        return {"id": rid, "type": "message", "role": "assistant", "model": model,
                "content": content,
                "stop_reason": step.stop if final else None,
                "stop_sequence": None,
                "usage": usage_anthropic(step.u, final)}

    @staticmethod
    def blocks(step):
        out = []
        if step.reasoning:
            out.append({"type": "thinking", "thinking": step.reasoning,
                        "signature": "ZmFrZS1zaWduYXR1cmU="})
        if step.text:
            out.append({"type": "text", "text": step.text})
        for c in step.tool_calls:
            out.append({"type": "tool_use", "id": c.get("id", "toolu_fake"),
                        "name": c["name"], "input": c.get("input", {})})
        return out

    @classmethod
    def json(cls, step, model, body):
        m = cls.message(step, model, "msg_fake%04d" % step.index, True, cls.blocks(step))
        if step.get("omit_usage"):
            del m["usage"]
        return m

    @classmethod
    def events(cls, step, model, body):
        ev = []
        omit = step.get("omit_usage")

        def add(data, kind="content"):
            ev.append((data["type"], dumps(data), kind))
        start = cls.message(step, model, "msg_fake%04d" % step.index, False, [])
        if omit:
            del start["usage"]
        add({"type": "message_start", "message": start}, "start")
        idx = 0
        pinged = False

        def ping():
            nonlocal pinged
            if not pinged:
                add({"type": "ping"}, "ping")
                pinged = True
        if step.reasoning:
            add({"type": "content_block_start", "index": idx,
                 "content_block": {"type": "thinking", "thinking": "", "signature": ""}})
            ping()
            for p in pieces(step.reasoning, step.delta_size):
                add({"type": "content_block_delta", "index": idx,
                     "delta": {"type": "thinking_delta", "thinking": p}})
            add({"type": "content_block_delta", "index": idx,
                 "delta": {"type": "signature_delta", "signature": "ZmFrZS1zaWduYXR1cmU="}})
            add({"type": "content_block_stop", "index": idx})
            idx += 1
        if step.text:
            add({"type": "content_block_start", "index": idx,
                 "content_block": {"type": "text", "text": ""}})
            ping()
            for p in pieces(step.text, step.delta_size):
                add({"type": "content_block_delta", "index": idx,
                     "delta": {"type": "text_delta", "text": p}})
            add({"type": "content_block_stop", "index": idx})
            idx += 1
        for c in step.tool_calls:
            add({"type": "content_block_start", "index": idx,
                 "content_block": {"type": "tool_use", "id": c.get("id", "toolu_fake"),
                                   "name": c["name"], "input": {}}})
            ping()
            add({"type": "content_block_delta", "index": idx,
                 "delta": {"type": "input_json_delta", "partial_json": ""}})
            for p in pieces(step.args_json(c), step.delta_size or 7):
                add({"type": "content_block_delta", "index": idx,
                     "delta": {"type": "input_json_delta", "partial_json": p}})
            add({"type": "content_block_stop", "index": idx})
            idx += 1
        md = {"type": "message_delta",
              "delta": {"stop_reason": step.stop, "stop_sequence": None}}
        if not omit:
            md["usage"] = usage_anthropic_delta(step.u)
        add(md, "usage")
        add({"type": "message_stop"}, "terminal")
        return ev

    @staticmethod
    def error_events(step, n, model):
        e = step.get("error") or {"type": "overloaded_error", "message": "Overloaded"}
        return [("error", dumps({"type": "error", "error": e, "request_id": "req_fake"}), "error")]

    @staticmethod
    def malformed():
        return ("content_block_delta", '{"type":"content_block_delta","index":0,"delta":{"type":"text_delta","text":"oops', "bad")


class Chat:
    name = "openai"

    @staticmethod
    def json(step, model, body):
        msg = {"role": "assistant", "content": step.text or None, "refusal": None,
               "annotations": []}
        if step.tool_calls:
            msg["tool_calls"] = [{"id": c.get("id", "call_fake"), "type": "function",
                                  "function": {"name": c["name"], "arguments": step.args_json(c)}}
                                 for c in step.tool_calls]
        out = {"id": "chatcmpl-fake%04d" % step.index, "object": "chat.completion",
               "created": CREATED, "model": model,
               "choices": [{"index": 0, "message": msg, "logprobs": None,
                            "finish_reason": stop_chat(step)}],
               "usage": usage_chat(step.u), "service_tier": "default",
               "system_fingerprint": "fp_fake"}
        if step.get("omit_usage"):
            del out["usage"]
        return out

    @staticmethod
    def events(step, model, body):
        opts = body.get("stream_options") if isinstance(body, dict) else None
        include_usage = isinstance(opts, dict) and opts.get("include_usage") is True
        ev = []
        base = {"id": "chatcmpl-fake%04d" % step.index, "object": "chat.completion.chunk",
                "created": CREATED, "model": model, "service_tier": "default",
                "system_fingerprint": "fp_fake"}

        def chunk(delta, finish=None, kind="content"):
            c = dict(base)
            c["choices"] = [{"index": 0, "delta": delta, "logprobs": None, "finish_reason": finish}]
            if include_usage:
                c["usage"] = None
            ev.append((None, dumps(c), kind))
        chunk({"role": "assistant", "content": "" if step.text or not step.tool_calls else None,
               "refusal": None}, kind="start")
        for p in pieces(step.text, step.delta_size):
            chunk({"content": p})
        for i, c in enumerate(step.tool_calls):
            chunk({"tool_calls": [{"index": i, "id": c.get("id", "call_fake"), "type": "function",
                                   "function": {"name": c["name"], "arguments": ""}}]})
            for p in pieces(step.args_json(c), step.delta_size or 7):
                chunk({"tool_calls": [{"index": i, "function": {"arguments": p}}]})
        chunk({}, stop_chat(step), kind="finish")
        if include_usage and not step.get("omit_usage"):
            c = dict(base)
            c["choices"] = []
            c["usage"] = usage_chat(step.u)
            ev.append((None, dumps(c), "usage"))
        ev.append((None, "[DONE]", "terminal"))
        return ev

    @staticmethod
    def error_events(step, n, model):
        e = step.get("error") or {"message": "The server had an error while processing your request.",
                                  "type": "server_error", "param": None, "code": None}
        return [(None, dumps({"error": e}), "error")]

    @staticmethod
    def malformed():
        return (None, '{"id":"chatcmpl-fake","object":"chat.completion.chunk","choices":[{"index":0,"delta":{"content":"oops', "bad")


class Responses:
    name = "openai"

    @staticmethod
    def response(step, model, body, status, output, usage):
        r = {"id": "resp_fake%04d" % step.index, "object": "response", "created_at": CREATED,
             "status": status, "background": False, "error": None,
             "incomplete_details": None, "instructions": None, "max_output_tokens": None,
             "model": model, "output": output, "parallel_tool_calls": True,
             "previous_response_id": None,
             "reasoning": {"effort": None, "summary": None}, "service_tier": "default",
             "store": True, "temperature": 1.0, "text": {"format": {"type": "text"}},
             "tool_choice": "auto", "tools": [], "top_p": 1.0, "truncation": "disabled",
             "usage": usage, "user": None, "metadata": {}}
        if isinstance(body, dict):
            for k in ("instructions", "max_output_tokens", "previous_response_id"):
                if k in body:
                    r[k] = body[k]
        if status == "completed":
            r["completed_at"] = CREATED + 1
        if status == "incomplete":
            r["incomplete_details"] = {"reason": "max_output_tokens"}
        return r

    @staticmethod
    def items(step):
        out = []
        if step.reasoning:
            out.append({"id": "rs_fake%04d" % step.index, "type": "reasoning",
                        "summary": [{"type": "summary_text", "text": step.reasoning}]})
        if step.text:
            out.append({"id": "msg_fake%04d" % step.index, "type": "message", "status": "completed",
                        "content": [{"type": "output_text", "annotations": [], "logprobs": [],
                                     "text": step.text}],
                        "role": "assistant"})
        for i, c in enumerate(step.tool_calls):
            out.append({"id": "fc_fake%04d_%d" % (step.index, i), "type": "function_call",
                        "status": "completed", "arguments": step.args_json(c),
                        "call_id": c.get("id", "call_fake"), "name": c["name"]})
        return out

    @classmethod
    def final_status(cls, step):
        return "incomplete" if step.stop == "max_tokens" else "completed"

    @classmethod
    def json(cls, step, model, body):
        usage = None if step.get("omit_usage") else usage_responses(step.u)
        return cls.response(step, model, body, cls.final_status(step), cls.items(step), usage)

    @classmethod
    def events(cls, step, model, body):
        ev = []
        seq = [0]

        def add(data, kind="content"):
            d = {"type": data["type"], "sequence_number": seq[0]}
            d.update({k: v for k, v in data.items() if k != "type"})
            seq[0] += 1
            ev.append((d["type"], dumps(d), kind))
        add({"type": "response.created",
             "response": cls.response(step, model, body, "in_progress", [], None)}, "start")
        add({"type": "response.in_progress",
             "response": cls.response(step, model, body, "in_progress", [], None)}, "start")
        items = cls.items(step)
        oi = 0
        if step.reasoning:
            it = items[oi]
            iid = it["id"]
            add({"type": "response.output_item.added", "output_index": oi,
                 "item": {"id": iid, "type": "reasoning", "summary": []}})
            add({"type": "response.reasoning_summary_part.added", "item_id": iid,
                 "output_index": oi, "summary_index": 0,
                 "part": {"type": "summary_text", "text": ""}})
            for p in pieces(step.reasoning, step.delta_size):
                add({"type": "response.reasoning_summary_text.delta", "item_id": iid,
                     "output_index": oi, "summary_index": 0, "delta": p,
                     "obfuscation": "fk"})
            add({"type": "response.reasoning_summary_text.done", "item_id": iid,
                 "output_index": oi, "summary_index": 0, "text": step.reasoning})
            add({"type": "response.reasoning_summary_part.done", "item_id": iid,
                 "output_index": oi, "summary_index": 0,
                 "part": {"type": "summary_text", "text": step.reasoning}})
            add({"type": "response.output_item.done", "output_index": oi, "item": it})
            oi += 1
        if step.text:
            it = items[oi]
            iid = it["id"]
            add({"type": "response.output_item.added", "output_index": oi,
                 "item": {"id": iid, "type": "message", "status": "in_progress",
                          "content": [], "role": "assistant"}})
            part0 = {"type": "output_text", "annotations": [], "logprobs": [], "text": ""}
            add({"type": "response.content_part.added", "item_id": iid, "output_index": oi,
                 "content_index": 0, "part": part0})
            for p in pieces(step.text, step.delta_size):
                add({"type": "response.output_text.delta", "item_id": iid, "output_index": oi,
                     "content_index": 0, "delta": p, "logprobs": [], "obfuscation": "fk"})
            add({"type": "response.output_text.done", "item_id": iid, "output_index": oi,
                 "content_index": 0, "text": step.text, "logprobs": []})
            add({"type": "response.content_part.done", "item_id": iid, "output_index": oi,
                 "content_index": 0, "part": dict(part0, text=step.text)})
            add({"type": "response.output_item.done", "output_index": oi, "item": it})
            oi += 1
        for c in step.tool_calls:
            it = items[oi]
            iid = it["id"]
            add({"type": "response.output_item.added", "output_index": oi,
                 "item": dict(it, status="in_progress", arguments="")})
            args = step.args_json(c)
            for p in pieces(args, step.delta_size or 7):
                add({"type": "response.function_call_arguments.delta", "item_id": iid,
                     "output_index": oi, "delta": p, "obfuscation": "fk"})
            add({"type": "response.function_call_arguments.done", "item_id": iid,
                 "output_index": oi, "name": c["name"], "arguments": args})
            add({"type": "response.output_item.done", "output_index": oi, "item": it})
            oi += 1
        status = cls.final_status(step)
        usage = None if step.get("omit_usage") else usage_responses(step.u)
        add({"type": "response." + status,
             "response": cls.response(step, model, body, status, items, usage)}, "usage")
        return ev

    @classmethod
    def error_events(cls, step, n, model):
        # Sequence numbers continue from the n events already sent.
        e = step.get("error") or {"type": "server_error", "code": "server_error",
                                  "message": "The server had an error while processing your request.",
                                  "param": None}
        style = step.get("error_style", "both")
        out = []
        if style in ("both", "error"):
            out.append(("error", dumps({"type": "error", "sequence_number": n, "error": e}), "error"))
        if style in ("both", "failed"):
            r = cls.response(step, model, {}, "failed", [], None)
            r["error"] = {"code": e.get("code") or "server_error", "message": e.get("message", "")}
            out.append(("response.failed", dumps({"type": "response.failed",
                                                  "sequence_number": n + len(out),
                                                  "response": r}), "error"))
        return out

    @staticmethod
    def malformed():
        return ("response.output_text.delta", '{"type":"response.output_text.delta","delta":"oops', "bad")


class Gemini:
    name = "gemini"

    @staticmethod
    def parts(step):
        out = []
        if step.reasoning:
            out.append({"text": step.reasoning, "thought": True})
        if step.text:
            out.append({"text": step.text})
        for c in step.tool_calls:
            out.append({"functionCall": {"name": c["name"], "args": c.get("input", {})}})
        return out

    @staticmethod
    def wrap(step, model, parts, finish, usage):
        cand = {"content": {"parts": parts, "role": "model"}, "index": 0}
        if finish:
            cand["finishReason"] = finish
        r = {"candidates": [cand]}
        if usage is not None:
            r["usageMetadata"] = usage
        r["modelVersion"] = model
        r["responseId"] = "fakeResp%04d" % step.index
        return r

    @classmethod
    def json(cls, step, model, body):
        usage = None if step.get("omit_usage") else usage_gemini(step.u)
        return cls.wrap(step, model, cls.parts(step), stop_gemini(step), usage)

    @classmethod
    def events(cls, step, model, body):
        omit = step.get("omit_usage")
        chunks = []
        for p in pieces(step.reasoning, step.delta_size):
            chunks.append([{"text": p, "thought": True}])
        for p in pieces(step.text, step.delta_size):
            chunks.append([{"text": p}])
        for c in step.tool_calls:
            chunks.append([{"functionCall": {"name": c["name"], "args": c.get("input", {})}}])
        if not chunks:
            chunks.append([{"text": ""}])
        ev = []
        n = len(chunks)
        for i, parts in enumerate(chunks):
            last = i == n - 1
            usage = None if omit else usage_gemini(step.u, i + 1, n)
            d = cls.wrap(step, model, parts, stop_gemini(step) if last else None, usage)
            # Gemini puts a space after each colon in its streamed JSON
            ev.append((None, json.dumps(d, separators=(",", ": "), ensure_ascii=False),
                       "usage" if last else "content"))
        return ev

    @staticmethod
    def error_events(step, n, model):
        e = step.get("error") or {"code": 503, "message": "The model is overloaded. Please try again later.",
                                  "status": "UNAVAILABLE"}
        return [(None, dumps({"error": e}), "error")]

    @staticmethod
    def malformed():
        return (None, '{"candidates":[{"content":{"parts":[{"text":"oops', "bad")


# -------------------------------------------------------------------- server

GEMINI_RE = re.compile(r"^/v1(?:beta|alpha)?/models/([^/:]+):(generateContent|streamGenerateContent)$")


class Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    server_version = "fakeprov/1"
    sys_version = ""

    def log_message(self, fmt, *args):  # quiet: the NDJSON log is the record
        pass

    def setup(self):
        super().setup()
        try:
            self.connection.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        except OSError:
            pass

    # -- request side

    def read_body(self):
        te = (self.headers.get("Transfer-Encoding") or "").lower()
        if "chunked" in te:
            data = b""
            while True:
                line = self.rfile.readline()
                size = int(line.split(b";")[0].strip() or b"0", 16)
                if size == 0:
                    while self.rfile.readline() not in (b"\r\n", b"\n", b""):
                        pass
                    return data
                data += self.rfile.read(size)
                self.rfile.readline()
        n = int(self.headers.get("Content-Length") or 0)
        return self.rfile.read(n) if n > 0 else b""

    def route(self, path):
        if path == "/v1/messages":
            return Anthropic, None
        if path == "/v1/chat/completions":
            return Chat, None
        if path == "/v1/responses":
            return Responses, None
        m = GEMINI_RE.match(path)
        if m:
            return Gemini, m
        return None, None

    def authorised(self, proto, query):
        h = self.headers
        if proto is Anthropic:
            return bool(h.get("x-api-key") or (h.get("authorization") or "").startswith("Bearer "))
        if proto is Gemini:
            return bool(h.get("x-goog-api-key") or query.get("key"))
        return (h.get("authorization") or "").startswith("Bearer ") and len(h.get("authorization")) > 7

    def do_GET(self):
        self.handle_any()

    def do_POST(self):
        self.handle_any()

    def handle_any(self):
        srv = self.server
        parts = urlsplit(self.path)
        path, query_s = parts.path, parts.query
        query = parse_qs(query_s)
        raw = self.read_body()
        try:
            body = json.loads(raw.decode("utf-8")) if raw else None
        except (ValueError, UnicodeDecodeError):
            body = raw.decode("utf-8", "replace")
        proto, gm = self.route(path)
        step = None
        status_note = None
        if proto is None or self.command != "POST":
            status_note = "no-route"
        elif srv.script.require_auth and not self.authorised(proto, query):
            status_note = "unauthorised"
        else:
            step = srv.script.take()
            if step is None:
                status_note = "exhausted"
        headers = {k.lower(): v for k, v in self.headers.items()}
        srv.log.write(lambda n: {"n": n, "method": self.command, "path": path, "query": query_s,
                                 "headers": headers, "body": body,
                                 "step": step.index if step else None,
                                 **({"note": status_note} if status_note else {})})
        if status_note == "no-route":
            return self.send_json(404, {"error": {"message": "fake provider: no route for %s %s" % (self.command, path),
                                                  "type": "not_found"}})
        pname = proto.name
        if status_note == "unauthorised":
            return self.send_json(401, error_body(pname, 401, "fake provider: missing API key"))
        if status_note == "exhausted":
            return self.send_json(500, error_body(pname, 500, "fake provider: script exhausted"))

        if step.get("first_byte_delay_ms"):
            time.sleep(step.get("first_byte_delay_ms") / 1000.0)

        if gm:
            model = gm.group(1)
            streaming = gm.group(2) == "streamGenerateContent"
            sse = streaming and query.get("alt", [""])[0] == "sse"
        else:
            model = (body.get("model") if isinstance(body, dict) else None) or "fake-model"
            streaming = isinstance(body, dict) and body.get("stream") is True
            sse = streaming
        model = step.model or model

        extra = dict(step.get("headers") or {})
        rid_header = {"anthropic": "request-id", "openai": "x-request-id"}.get(pname)
        if rid_header and rid_header not in {k.lower() for k in extra}:
            extra[rid_header] = "req_fake%04d" % step.index

        status = int(step.get("status", 200))
        if "raw" in step.raw:
            ctype = step.get("content_type") or ("text/event-stream" if sse else "application/json")
            data = step.get("raw")
            data = data.encode("utf-8") if isinstance(data, str) else bytes(data)
            return self.send_bytes(status, ctype, data, extra, step)
        if status >= 400 or "body" in step.raw:
            b = step.get("body")
            if b is None:
                b = dumps(error_body(pname, status))
            elif not isinstance(b, str):
                b = dumps(b)
            return self.send_bytes(status, "application/json", b.encode("utf-8"), extra, step)

        if not streaming:
            obj = proto.json(step, model, body)
            if proto is Gemini:  # Gemini pretty-prints its JSON answers
                text = json.dumps(obj, indent=2, ensure_ascii=False)
            else:
                text = dumps(obj)
            return self.send_bytes(200, "application/json; charset=utf-8",
                                   text.encode("utf-8"), extra, step)
        events = proto.events(step, model, body)
        if not sse:  # Gemini streamGenerateContent without alt=sse: a JSON array
            text = "[" + ",\r\n".join(e[1] for e in events) + "]"
            return self.send_bytes(200, "application/json; charset=UTF-8", text.encode("utf-8"), extra, step)
        return self.send_stream(proto, step, model, events, extra)

    # -- response side

    def write_head(self, status, ctype, headers, length=None):
        reason = {200: "OK", 400: "Bad Request", 401: "Unauthorized", 404: "Not Found",
                  429: "Too Many Requests", 500: "Internal Server Error",
                  503: "Service Unavailable", 529: "Overloaded"}.get(status, "Status")
        lines = ["HTTP/1.1 %d %s" % (status, reason),
                 "Date: " + self.date_time_string(),
                 "Content-Type: " + ctype]
        if length is None:
            lines.append("Transfer-Encoding: chunked")
        elif length >= 0:
            lines.append("Content-Length: %d" % length)
        # length < 0: neither; the body ends when the connection closes
        if ctype.startswith("text/event-stream"):
            lines.append("Cache-Control: no-cache")
        for k, v in headers.items():
            lines.append("%s: %s" % (k, v))
        if self.close_connection:
            lines.append("Connection: close")
        self.wfile.write(("\r\n".join(lines) + "\r\n\r\n").encode("latin-1"))

    def body_writer(self, step, chunked):
        split = int(step.get("split") or 0)

        def frame(b):
            if not b:
                return b""
            return (b"%x\r\n" % len(b)) + b + b"\r\n" if chunked else b

        def write(b):
            if split > 0:
                for i in range(0, len(b), split):
                    self.wfile.write(frame(b[i:i + split]))
                    self.wfile.flush()
                    time.sleep(0.002)
            else:
                self.wfile.write(frame(b))
                self.wfile.flush()
        return write

    def send_json(self, status, obj):
        self.send_bytes(status, "application/json", dumps(obj).encode("utf-8"), {}, None)

    def send_bytes(self, status, ctype, data, headers, step):
        framing = (step.get("framing") if step else None) or "length"
        self.close_connection = framing == "close" or self.close_connection
        length = {"length": len(data), "chunked": None}.get(framing, -1)
        self.write_head(status, ctype, headers, length)
        write = self.body_writer(step or Step({}, -1), framing == "chunked")
        write(data)
        if framing == "chunked":
            self.wfile.write(b"0\r\n\r\n")
        self.wfile.flush()

    def send_stream(self, proto, step, model, events, extra):
        framing = step.get("framing") or "chunked"
        chunked = framing == "chunked"
        if framing == "close":
            self.close_connection = True
        ctype = {"anthropic": "text/event-stream; charset=utf-8",
                 "openai": "text/event-stream; charset=utf-8",
                 "gemini": "text/event-stream"}[proto.name]
        crlf = step.get("crlf")
        if crlf is None:
            crlf = proto is Gemini  # Gemini ends its SSE lines with CRLF
        nl = "\r\n" if crlf else "\n"
        def position(v):
            """An event count, or "usage": just before the event that
            carries the final usage (or the terminal one when none does)."""
            if v is None or not isinstance(v, str):
                return v
            kinds = [e[2] for e in events]
            for k in ("usage", "terminal"):
                if k in kinds:
                    return kinds.index(k)
            return len(events)
        cut = position(step.get("cut_after_events"))
        err = position(step.get("error_event_after"))
        bad = position(step.get("malformed_after"))
        delay = (step.get("chunk_delay_ms") or 0) / 1000.0
        proto_events_uncut = events
        if cut is not None:
            events = events[:int(cut)]
        if err is not None:
            events = events[:int(err)] + proto.error_events(step, int(err), model)
        if bad is not None:
            events = events[:int(bad)] + [proto.malformed()] + events[int(bad):]
        def sse(name, data):
            return (("event: %s%s" % (name, nl) if name else "") + "data: " + data + nl + nl).encode("utf-8")
        texts = [sse(n, d) for n, d, _k in events]
        length = None if chunked else -1
        if framing == "length":
            # an abrupt cut announces the whole answer and leaves the body short
            abrupt = cut is not None and step.get("cut_mode", "abrupt") != "clean"
            full = proto_events_uncut if abrupt else events
            length = sum(len(sse(n, d)) for n, d, _k in full)
        self.write_head(200, ctype, extra, length)
        write = self.body_writer(step, chunked)
        try:
            for i, text in enumerate(texts):
                if delay and i:
                    time.sleep(delay)
                write(text)
            if cut is not None and step.get("cut_mode", "abrupt") != "clean":
                self.close_connection = True
                if step.get("cut_mode") == "reset":
                    self.connection.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER,
                                               struct.pack("ii", 1, 0))
                    self.connection.close()  # with no FIN first: an RST
                return
            if chunked:
                self.wfile.write(b"0\r\n\r\n")
            self.wfile.flush()
            if cut is not None:
                self.close_connection = True
        except (BrokenPipeError, ConnectionResetError):
            self.close_connection = True


class Server(ThreadingHTTPServer):
    daemon_threads = True
    allow_reuse_address = True


def main():
    ap = argparse.ArgumentParser(description="Scripted fake LLM provider (loopback only).")
    ap.add_argument("--script", required=True)
    ap.add_argument("--log", required=True)
    ap.add_argument("--port-file", required=True)
    ap.add_argument("--port", type=int, default=0)
    ap.add_argument("--watch-pid", type=int, default=0,
                    help="exit when this process is gone (the test that started us)")
    a = ap.parse_args()
    srv = Server(("127.0.0.1", a.port), Handler)
    srv.script = Script(a.script)
    srv.log = Log(a.log)

    def stop(signum, frame):
        raise SystemExit(0)
    signal.signal(signal.SIGTERM, stop)
    signal.signal(signal.SIGINT, stop)
    if a.watch_pid > 0:
        def watch():
            while True:
                time.sleep(0.2)
                try:
                    os.kill(a.watch_pid, 0)
                except ProcessLookupError:
                    os.kill(os.getpid(), signal.SIGTERM)
                    return
                except PermissionError:
                    pass
        threading.Thread(target=watch, daemon=True).start()
    tmp = a.port_file + ".tmp"
    with open(tmp, "w") as f:
        f.write("%d\n" % srv.server_address[1])
    os.replace(tmp, a.port_file)
    try:
        srv.serve_forever(poll_interval=0.05)
    finally:
        srv.server_close()


if __name__ == "__main__":
    main()
