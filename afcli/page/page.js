// The page of one af run. Every text comes from the data block and goes into the page
// through textContent: nothing in a recording is ever parsed as HTML or run.
"use strict";
(function () {
  const data = JSON.parse(document.getElementById("af-data").textContent);
  const app = document.getElementById("app");
  const calls = data.calls;

  // Control characters (an escape sequence's ESC) spelled out, as the terminal views do.
  const CONTROL = /[\u0000-\u0008\u000b-\u001f\u007f-\u009f]/g;
  function visible(text) {
    return String(text).replace(CONTROL, function (c) {
      return "\\x" + c.charCodeAt(0).toString(16).padStart(2, "0");
    });
  }
  function el(tag, cls, text) {
    const node = document.createElement(tag);
    if (cls) node.className = cls;
    if (text !== undefined && text !== null) node.textContent = visible(text);
    return node;
  }
  function add(parent, ...children) {
    for (const c of children) if (c) parent.appendChild(c);
    return parent;
  }
  function json(value) {
    return typeof value === "string" ? value : JSON.stringify(value, null, 2);
  }
  function trouble(c) {
    if (c.errors && c.errors.length) return "failed: " + c.errors[0].kind;
    const r = c.response;
    if (r && r.decision && r.decision.verb && r.decision.verb !== "ok") return "reply " + r.decision.verb;
    for (const g of c.governed || []) if (["deny", "decline", "failed"].includes(g.verb)) return g.kind + ": " + g.verb;
    for (const a of c.invalid_args || []) if (a.enforced) return "invalid args to " + a.name;
    for (const t of c.results || []) if (t.is_error) return "tool " + t.name + " failed";
    if (!c.verified) return "does not verify";
    return null;
  }

  // -- the head: what ran, how it ended, whether it verifies --------------------------
  const run = data.run;
  const head = el("header", "head");
  add(head, el("h1", null, "af run " + (run.run_id || "")));
  const facts = el("dl", "facts");
  function fact(name, value, cls) {
    add(facts, el("dt", null, name), el("dd", cls || null, value));
  }
  const agent = run.agent || {};
  fact("agent", (agent.name || "?") + (agent.source ? "  (" + agent.source + ")" : ""));
  fact("model", run.model + (run.provider && run.provider.name ? "  · " + run.provider.name : ""));
  fact("outcome", (run.status || "?") + " after " + run.calls + " calls, " + run.iterations + " iterations",
       run.status === "answer" ? "good" : "bad");
  const v = data.verify;
  fact("verify", (v.ok ? "✓ " : "✗ ") + v.verified + "/" + v.calls + " calls rebuild to their hashes" +
       (v.problems.length ? " · " + v.problems.length + " problems" : ""), v.ok ? "good" : "bad");
  if (data.bundle) {
    fact("redacted", data.bundle.redactions + " values at export" +
         (data.bundle.forced ? " · exported with --force: " + data.bundle.secrets_found + " secrets found" : ""),
         data.bundle.forced ? "bad" : null);
  }
  if (data.shown && (data.shown[0] !== 1 || data.shown[1] !== run.calls)) {
    fact("shown", "calls " + data.shown[0] + " to " + data.shown[1] + " of " + run.calls);
  }
  add(head, facts);
  if (run.answer !== null && run.answer !== undefined && run.answer !== "") {
    add(head, el("h2", null, "answer"), el("pre", "answer", json(run.answer)));
  }
  if (run.error) add(head, el("pre", "error", (run.error.kind || "error") + ": " + (run.error.message || "")));
  add(app, head);

  // -- the scrubber -------------------------------------------------------------------
  const scrub = el("nav", "scrubber");
  const prev = el("button", null, "◀ prev");
  const next = el("button", null, "next ▶");
  prev.id = "prev";
  next.id = "next";
  const range = el("input");
  range.type = "range";
  range.id = "scrub";
  range.min = "0";
  range.max = String(Math.max(0, calls.length - 1));
  range.value = "0";
  const where = el("span", "where");
  where.id = "where";
  const chips = el("ol", "chips");
  chips.id = "chips";
  calls.forEach(function (c, i) {
    const chip = el("li", "chip", String(c.call));
    const t = trouble(c);
    if (t) { chip.classList.add("trouble"); chip.title = t; }
    if (c.kind !== "agent") chip.classList.add("summarizer");
    chip.dataset.index = String(i);
    chip.addEventListener("click", function () { show(i); });
    chips.appendChild(chip);
  });
  add(scrub, prev, range, next, where, chips);
  add(app, scrub);

  const panel = el("main", "call");
  panel.id = "call";
  add(app, panel);

  if (data.why) {
    const why = el("section", "why");
    add(why, el("h2", null, "why: the answer"));
    const list = el("ul");
    for (const line of data.why) add(list, el("li", "why-" + line.kind, line.text));
    add(why, list);
    add(app, why);
  }
  add(app, el("footer", null, "written by af " + data.af_version + " · self-contained, no network"));

  // -- one call: its three slots, its reply, what followed -----------------------------
  function provenance(p) {
    const parts = [];
    if (p.source) parts.push(p.source);
    if (p.id) parts.push(p.id);
    if (p.trigger) parts.push("trigger " + p.trigger);
    if (p.reason) parts.push(p.reason);
    return el("div", "prov", parts.join(" · "));
  }
  function cacheMarks(entry, node) {
    if (entry.cache) node.appendChild(el("span", "cache", "cache " + entry.cache));
    if (entry.cache_breakpoint) node.appendChild(el("span", "cache bp", "⚑ cache breakpoint"));
  }
  const LONG = 1500;
  function longText(text, cls) {
    // A long text opens on its first part; the rest is one click away, never lost.
    if (text.length <= LONG) return el("pre", cls, text);
    const box = el("details", "long");
    add(box, el("summary", null, text.slice(0, 300).replace(/\s+/g, " ") + " … (" + text.length + " characters)"));
    add(box, el("pre", cls, text));
    return box;
  }
  function textOrJson(text) {
    const s = text.trim();
    if ((s[0] === "{" && s[s.length - 1] === "}") || (s[0] === "[" && s[s.length - 1] === "]")) {
      try {
        const box = el("div");
        add(box, el("div", "prov", "JSON, laid out (sent as one line)"));
        add(box, longText(JSON.stringify(JSON.parse(s), null, 2), "json"));
        return box;
      } catch (e) { /* not JSON after all: shown as it is */ }
    }
    return longText(text, "text");
  }
  function content(value) {
    if (typeof value === "string") return textOrJson(value);
    if (!Array.isArray(value)) return el("pre", "json", json(value));
    const box = el("div", "blocks");
    for (const b of value) {
      if (b && b.type === "text") box.appendChild(longText(String(b.text), "text"));
      else if (b && b.type === "tool_call") {
        box.appendChild(el("pre", "toolcall", "→ " + b.name + " " + json(b.args) + "   [" + b.id + "]"));
      } else if (b && b.type === "thinking") box.appendChild(el("pre", "thinking", b.thinking || b.text || ""));
      else box.appendChild(el("pre", "json", json(b)));
    }
    return box;
  }
  function slot(title, count) {
    const s = el("section", "slot");
    add(s, el("h3", null, title + (count === null ? " (cannot be rebuilt)" : " · " + count)));
    return s;
  }

  function show(i) {
    if (!calls.length) { panel.textContent = "This run made no model calls."; return; }
    i = Math.max(0, Math.min(calls.length - 1, i));
    range.value = String(i);
    for (const chip of chips.children) chip.classList.toggle("on", chip.dataset.index === String(i));
    const c = calls[i];
    const before = i > 0 ? new Set(calls[i - 1].messages || []) : new Set();
    where.textContent = "call " + c.call + " of " + run.calls;
    try {
      if (location.hash !== "#call-" + c.call) history.replaceState(null, "", "#call-" + c.call);
    } catch (e) { /* a page opened where history cannot change: the scrubber still works */ }
    panel.replaceChildren();
    const title = el("h2", null, "call " + c.call + " · iteration " + c.iteration + " · " + c.model +
                     (c.kind !== "agent" ? " · " + c.kind : ""));
    add(panel, title);
    add(panel, el("div", c.verified ? "good" : "bad",
                  c.verified ? "✓ rebuilds to the hash taken when it was sent" : "✗ " + (c.problem || "does not verify")));
    const t = trouble(c);
    if (t) add(panel, el("div", "bad trouble-note", "✗ " + t));

    const slots = el("div", "slots");
    const sys = slot("system", c.system === null ? null : c.system.length);
    sys.id = "slot-system";
    for (const k of c.system || []) {
      const s = data.system[k];
      const box = el("div", "entry");
      add(box, provenance(s));
      cacheMarks(s, box);
      add(box, longText(String(s.text), "text"));
      sys.appendChild(box);
    }
    const msgs = slot("messages", c.messages === null ? null : c.messages.length);
    msgs.id = "slot-messages";
    const seams = {};
    for (const s of c.seams || []) (seams[s.before === null ? "end" : s.before] = seams[s.before] || []).push(s);
    for (const n of c.messages || []) {
      for (const s of seams[n] || []) msgs.appendChild(el("div", "seam", "⋯ fold: " + s.text));
      const m = data.messages[String(n)];
      const box = el("div", "entry msg role-" + String(m.role).replace(/[^a-z_]/g, ""));
      const label = el("div", "prov", "#" + n + " " + m.role + (m.name ? " · " + m.name : "") +
                       (m.writer ? " · by " + m.writer : "") + (m.tool_call_id ? " · for " + m.tool_call_id : ""));
      if (i > 0 && !before.has(n)) label.appendChild(el("span", "new", "new"));
      add(box, label);
      if (m.source) add(box, provenance(m));
      add(box, content(m.content));
      msgs.appendChild(box);
    }
    for (const s of seams["end"] || []) msgs.appendChild(el("div", "seam", "⋯ fold: " + s.text));
    const tls = slot("tools", c.tools === null ? null : c.tools.length);
    tls.id = "slot-tools";
    for (const k of c.tools || []) {
      const tool = data.tools[k];
      const box = el("div", "entry");
      add(box, el("div", "toolname", tool.name));
      if (tool.source || tool.id) add(box, provenance(tool));
      cacheMarks(tool, box);
      if (tool.description) add(box, el("pre", "text", tool.description));
      if (tool.input_schema) {
        const schema = el("details", "schema");
        add(schema, el("summary", null, "input schema"), el("pre", "json small", json(tool.input_schema)));
        add(box, schema);
      }
      tls.appendChild(box);
    }
    add(slots, sys, msgs, tls);
    add(panel, slots);

    const resp = el("section", "response");
    resp.id = "response";
    add(resp, el("h3", null, "response"));
    const r = c.response;
    if (r) {
      const u = r.usage || {};
      add(resp, el("div", "prov", "stop " + r.stop_reason + " · " + (u.input_tokens || 0) + " in / " +
                   (u.output_tokens || 0) + " out tokens" + (r.ms ? " · " + r.ms + " ms" : "")));
      if (r.text) add(resp, el("pre", "text", r.text));
      for (const tc of r.tool_calls || []) add(resp, el("pre", "toolcall", "→ " + tc.name + " " + json(tc.args)));
    } else add(resp, el("div", "bad", "no reply"));
    for (const e of c.errors || []) add(resp, el("pre", "error", e.kind + ": " + e.message));
    for (const g of c.governed || []) add(resp, el("div", "governed", g.kind + " " + g.verb + ": " + g.words.join(" · ")));
    for (const a of c.invalid_args || []) {
      add(resp, el("pre", "error", "invalid args to " + a.name + (a.enforced ? " (refused)" : "") + ": " + json(a.problems)));
    }
    if ((c.results || []).length) {
      add(resp, el("h3", null, "tool results"));
      for (const tr of c.results) {
        const box = el("div", "entry" + (tr.is_error ? " error" : ""));
        add(box, el("div", "prov", "← " + tr.name + " · " + tr.status + (tr.ms ? " · " + tr.ms + " ms" : "")));
        const sent = tr.message !== undefined ? data.messages[String(tr.message)] : null;
        if (sent) add(box, el("div", "prov", "message #" + tr.message));
        add(box, sent ? content(sent.content) : textOrJson(String(tr.content)));
        resp.appendChild(box);
      }
    }
    add(panel, resp);
  }

  prev.addEventListener("click", function () { show(Number(range.value) - 1); });
  next.addEventListener("click", function () { show(Number(range.value) + 1); });
  range.addEventListener("input", function () { show(Number(range.value)); });
  document.addEventListener("keydown", function (e) {
    if (e.key === "ArrowLeft" || e.key === "k") show(Number(range.value) - 1);
    if (e.key === "ArrowRight" || e.key === "j") show(Number(range.value) + 1);
  });
  const m = /^#call-(\d+)$/.exec(location.hash);
  const start = m ? calls.findIndex(function (c) { return c.call === Number(m[1]); }) : 0;
  show(start < 0 ? 0 : start);
  document.body.dataset.ready = "1";
})();
