#!/usr/bin/env python3
"""A fake of the parts of GitHub that issue-runner's `gh` commands use,
for tests/it/gh_forge.rs. Standard library only.

It is the HTTP proxy of the real `gh` (and of the git it runs): with
GH_HOST=github.localhost, Debian's gh 2.23 talks plain HTTP to
http://api.github.localhost/graphql, and `gh repo clone` runs git on
http://github.localhost/<owner>/<name>.git; both honour HTTP_PROXY, so every
request arrives here in absolute form and nothing leaves the machine.

    fake_github.py <dir>

<dir>/state.json is the forge: {"repo": "o/r", "issues": {"<n>": {"title",
"body", "author", "createdAt", "labels": [...], "comments": [...]}},
"pulls": [{"number", "branch", "checks": [[check, ...], ...]}]}. It is
read on every request and written back after a change, so a test may edit
it between runs. The k-th look at a pull request's checks gets its k-th
list (the last one from then on); a check is {"name", "status",
"conclusion"} as GitHub's CheckRun has them. Git is served by `git
http-backend` from <dir>/git/<owner>/<name>.git (pushes allowed).

Every request is appended to <dir>/calls.jsonl: {"method", "url",
"operation" (a GraphQL operation's name), "variables", "body"}. An unknown
request gets a 404 (and is still recorded), so a test sees what gh asked.

It prints its port on stdout once listening on 127.0.0.1 (port 0: any
free one), and exits when its stdin closes, so it cannot outlive the test
that started it.
"""

import json
import os
import re
import subprocess
import sys
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from urllib.parse import urlsplit

DIR = sys.argv[1]
STATE = os.path.join(DIR, "state.json")
CALLS = os.path.join(DIR, "calls.jsonl")
LOCK = threading.Lock()


def load():
    with open(STATE, encoding="utf-8") as f:
        return json.load(f)


def save(state):
    tmp = STATE + ".tmp"
    with open(tmp, "w", encoding="utf-8") as f:
        json.dump(state, f, indent=1)
    os.replace(tmp, STATE)


def record(entry):
    with open(CALLS, "a", encoding="utf-8") as f:
        f.write(json.dumps(entry) + "\n")


def user(login):
    return {"id": "U_" + login, "login": login, "name": login.title()}


def label_node(name):
    return {"id": "LA_" + name, "name": name, "description": "", "color": "ededed"}


def issue_node(owner_repo, number, issue):
    labels = [label_node(n) for n in issue.get("labels", [])]
    return {
        "__typename": "Issue",
        "id": "I_%d" % number,
        "number": number,
        "title": issue.get("title", ""),
        "body": issue.get("body", ""),
        "url": "http://github.localhost/%s/issues/%d" % (owner_repo, number),
        "state": "OPEN",
        "createdAt": issue.get("createdAt", "2024-01-01T00:00:00Z"),
        "author": user(issue.get("author", "ghost")),
        "labels": {"nodes": labels, "totalCount": len(labels)},
    }


def issue_by_id(state, node_id):
    number = node_id[2:] if node_id.startswith("I_") else ""
    return number, state["issues"].get(number)


def search_label(query):
    # gh writes the search as "label:agent:todo repo:o/r state:open
    # type:issue" (a label with blanks in quotes).
    m = re.search(r'label:("([^"]*)"|\S+)', query)
    if not m:
        return None
    return m.group(2) if m.group(2) is not None else m.group(1)


def check_run(check):
    return {
        "__typename": "CheckRun",
        "name": check["name"],
        "status": check.get("status", "COMPLETED"),
        "conclusion": check.get("conclusion", ""),
        "startedAt": "2024-01-01T00:00:00Z",
        "completedAt": "2024-01-01T00:01:02Z",
        "detailsUrl": "http://ci.localhost/" + check["name"],
        "checkSuite": {"workflowRun": None},
        "isRequired": False,
    }


def graphql(state, operation, query, variables):
    """(changed, data) for a GraphQL request, or None when unknown."""
    owner_repo = state["repo"]
    repo_fields = {
        "id": "R_1",
        "name": owner_repo.split("/")[1],
        "owner": {"login": owner_repo.split("/")[0]},
        "hasIssuesEnabled": True,
        "description": "",
        "hasWikiEnabled": False,
        "viewerPermission": "ADMIN",
        "defaultBranchRef": {"name": "main"},
    }
    if operation == "RepositoryInfo":
        repo = dict(repo_fields, parent=None, mergeCommitAllowed=True,
                    rebaseMergeAllowed=True, squashMergeAllowed=True)
        return False, {"repository": repo}
    if operation == "IssueSearch":
        label = search_label(variables.get("query", ""))
        nodes = [
            issue_node(owner_repo, int(n), i)
            for n, i in sorted(state["issues"].items(), key=lambda kv: int(kv[0]))
            if label is None or label in i.get("labels", [])
        ]
        return False, {
            "repository": {"hasIssuesEnabled": True},
            "search": {
                "issueCount": len(nodes),
                "nodes": nodes,
                "pageInfo": {"hasNextPage": False, "endCursor": None},
            },
        }
    if operation == "IssueByNumber":
        n = str(variables.get("number"))
        issue = state["issues"].get(n)
        node = issue_node(owner_repo, int(n), issue) if issue else None
        return False, {"repository": {"hasIssuesEnabled": True, "issue": node}}
    if operation == "RepositoryLabelList":
        # gh decodes this one strictly: only the fields it asked for.
        names = sorted({l for i in state["issues"].values() for l in i.get("labels", [])}
                       | set(state.get("labels", [])))
        nodes = [{"id": "LA_" + n, "name": n} for n in names]
        return False, {"repository": {"labels": {
            "nodes": nodes, "pageInfo": {"hasNextPage": False, "endCursor": None}}}}
    if operation == "PullRequestForBranch":
        branch = variables.get("headRefName")
        nodes = [
            {
                "number": p["number"], "headRefName": p["branch"], "id": "PR_%d" % p["number"],
                "state": "OPEN", "baseRefName": "main", "isCrossRepository": False,
                "headRepositoryOwner": {"id": "U_o", "login": owner_repo.split("/")[0]},
            }
            for p in state.get("pulls", []) if p["branch"] == branch
        ]
        return False, {"repository": {"pullRequests": {"nodes": nodes},
                                      "defaultBranchRef": {"name": "main"}}}
    if operation == "PullRequestStatusChecks":
        node_id = variables.get("id", "")
        pull = next((p for p in state.get("pulls", []) if "PR_%d" % p["number"] == node_id), None)
        if pull is None:
            return False, {"node": None}
        looks = pull.get("looks", 0)
        lists = pull.get("checks") or [[]]
        checks = lists[min(looks, len(lists) - 1)]
        pull["looks"] = looks + 1
        contexts = {"nodes": [check_run(c) for c in checks],
                    "pageInfo": {"hasNextPage": False, "endCursor": None}}
        commit = {"commit": {"statusCheckRollup": {"contexts": contexts}}}
        return True, {"node": {"statusCheckRollup": {"nodes": [commit]}}}
    if operation in ("AddComment", "CommentCreate") or "addComment(" in query:
        inp = variables.get("input", {})
        number, issue = issue_by_id(state, inp.get("subjectId", ""))
        if issue is None:
            return None
        issue.setdefault("comments", []).append(inp.get("body", ""))
        url = "http://github.localhost/%s/issues/%s#issuecomment-%d" % (
            owner_repo, number, len(issue["comments"]))
        return True, {"addComment": {"commentEdge": {"node": {"url": url}}}}
    for field, payload in (("addLabelsToLabelable", "AddLabelsToLabelablePayload"),
                           ("removeLabelsFromLabelable", "RemoveLabelsFromLabelablePayload")):
        if field + "(" not in query:
            continue
        inp = variables.get("input", {})
        number, issue = issue_by_id(state, inp.get("labelableId", ""))
        if issue is None:
            return None
        names = [i[3:] for i in inp.get("labelIds", []) if i.startswith("LA_")]
        labels = issue.get("labels", [])
        if field.startswith("add"):
            issue["labels"] = labels + [n for n in names if n not in labels]
        else:
            issue["labels"] = [l for l in labels if l not in names]
        # Decoded strictly: the payload with just what was asked for.
        return True, {field: {"__typename": payload}}
    return None


class Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"

    def log_message(self, *args):
        pass

    def body(self):
        if self.headers.get("Transfer-Encoding", "").lower() == "chunked":
            data = b""
            while True:
                size = int(self.rfile.readline().strip().split(b";")[0], 16)
                if size == 0:
                    self.rfile.readline()
                    return data
                data += self.rfile.read(size)
                self.rfile.readline()
        n = int(self.headers.get("Content-Length") or 0)
        return self.rfile.read(n) if n else b""

    def reply(self, status, body, content_type="application/json", headers=()):
        self.send_response(status)
        self.send_header("Content-Type", content_type)
        self.send_header("Content-Length", str(len(body)))
        for k, v in headers:
            self.send_header(k, v)
        self.end_headers()
        self.wfile.write(body)

    def handle_any(self):
        url = urlsplit(self.path)
        data = self.body()
        entry = {"method": self.command, "url": self.path, "host": url.hostname or self.headers.get("Host")}
        if url.hostname == "api.github.localhost" and url.path in ("/graphql", "/api/graphql"):
            try:
                req = json.loads(data or b"{}")
            except ValueError:
                req = {}
            query = req.get("query", "")
            m = re.search(r"\b(?:query|mutation)\s+(\w+)", query)
            operation = m.group(1) if m else ""
            variables = req.get("variables") or {}
            entry.update(operation=operation, variables=variables, body=query)
            with LOCK:
                record(entry)
                state = load()
                answer = graphql(state, operation, query, variables)
                if answer is not None and answer[0]:
                    save(state)
            if answer is None:
                self.reply(404, b'{"message":"Not Found (fake_github: unknown query)"}')
            else:
                self.reply(200, json.dumps({"data": answer[1]}).encode())
            return
        if url.hostname == "github.localhost" and ".git/" in url.path:
            entry.update(body=data.decode("utf-8", "replace")[:200])
            with LOCK:
                record(entry)
            self.git(url, data)
            return
        entry.update(body=data.decode("utf-8", "replace"))
        with LOCK:
            record(entry)
        self.reply(404, b'{"message":"Not Found (fake_github)"}')

    def git(self, url, data):
        env = {
            "PATH": os.environ.get("PATH", "/usr/bin:/bin"),
            "GIT_PROJECT_ROOT": os.path.join(DIR, "git"),
            "GIT_HTTP_EXPORT_ALL": "1",
            # http-backend lets only a known user push.
            "REMOTE_USER": "agent",
            "REMOTE_ADDR": "127.0.0.1",
            "PATH_INFO": url.path,
            "QUERY_STRING": url.query,
            "REQUEST_METHOD": self.command,
            "CONTENT_TYPE": self.headers.get("Content-Type", ""),
            "CONTENT_LENGTH": str(len(data)),
            "GIT_PROTOCOL": self.headers.get("Git-Protocol", ""),
            "HTTP_CONTENT_ENCODING": self.headers.get("Content-Encoding", ""),
            "GIT_CONFIG_NOSYSTEM": "1",
            "HOME": DIR,
        }
        out = subprocess.run(["git", "http-backend"], input=data, env=env,
                             capture_output=True, check=False).stdout
        head, _, body = out.partition(b"\r\n\r\n")
        if not _:
            head, _, body = out.partition(b"\n\n")
        status, headers = 200, []
        for line in head.decode("latin-1").splitlines():
            k, _, v = line.partition(":")
            if k.lower() == "status":
                status = int(v.split()[0])
            elif k:
                headers.append((k.strip(), v.strip()))
        ctype = next((v for k, v in headers if k.lower() == "content-type"), "text/plain")
        rest = [(k, v) for k, v in headers if k.lower() not in ("content-type", "content-length")]
        self.reply(status, body, ctype, rest)

    do_GET = do_POST = do_PATCH = do_PUT = do_DELETE = handle_any


def main():
    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    server.daemon_threads = True
    threading.Thread(target=server.serve_forever, daemon=True).start()
    print(server.server_address[1], flush=True)
    # The test holds our stdin: when it closes (the test ended, or died),
    # so do we.
    sys.stdin.buffer.read()
    server.shutdown()


if __name__ == "__main__":
    main()
