// The hotseam web inbox. Every model-written string goes through textContent, never HTML.
//
// A card is live (answerable), on hold (its question was withdrawn by a reload or the
// connection is gone: shown in place, not answerable), or gone (a note saying why). A card on
// hold comes back in place when its question does (the same id after a reload; the same
// question after a restart), so nothing jumps; otherwise it says it is no longer asked.
//
// The fleet inbox (`hotseam inbox --journal URL`) serves the same page for many daemons: its
// questions carry `daemon` (who asks, and whether it is up) and `state` ("abandoned": nobody
// owns the question any more; it can only be cleared), and `changed` events update a card in
// place (a daemon went down or came back), keeping whatever was chosen or typed.
"use strict";
(function () {
  const token = new URLSearchParams(location.search).get("token") || "";
  const list = document.getElementById("questions");
  const empty = document.getElementById("empty");
  const status = document.getElementById("status");
  const cards = new Map();   // question id -> card element
  const drafts = new Map();  // fingerprint -> {question id: {choices, text, skip}}: kept when an ask is re-asked
  const NOTE_MS = 4000;      // a note of an ended question stays this long
  const HOLD_MS = 1500;      // a withdrawn question stays on hold this long for a reload to follow
  const RETURN_MS = 3000;    // after reconnecting, a question on hold waits this long to be asked again
  const TITLE = document.title;
  const client = Array.from(crypto.getRandomValues(new Uint8Array(12)),
    (b) => b.toString(16).padStart(2, "0")).join("");  // who this tab is, in answers it sends
  let source = null;
  let retry = 250;
  let connection = "connecting";  // live | connecting | stopped | bad-token

  function el(tag, props, children) {
    const node = document.createElement(tag);
    for (const [key, value] of Object.entries(props || {})) {
      if (key === "text") node.textContent = value;
      else if (key === "class") node.className = value;
      else if (value !== null && value !== undefined && value !== false) node.setAttribute(key, value === true ? "" : value);
    }
    for (const child of children || []) if (child) node.appendChild(child);
    return node;
  }

  function fingerprint(q) {
    // An approval asked again (a refused edit, a restart) is the same call: its draft is kept.
    if (approvalOf(q)) return JSON.stringify([q.agent && q.agent.id, "approval", q.approval.digest]);
    return JSON.stringify([q.agent && q.agent.id,
      q.questions.map((item) => [item.id, item.header, item.question, item.options.map((o) => o.label)])]);
  }

  function sentence(text) {
    text = String(text || "withdrawn");
    return text.charAt(0).toUpperCase() + text.slice(1) + ".";
  }

  // What was answered, in words: what was chosen or typed (after each question's text when
  // there are several).
  function shown(answer) {
    if (!answer) return "";
    const part = (item) => item.skipped ? "(" + item.skipped + ")"
      : [...(item.labels || []), ...(item.text !== undefined ? ["“" + item.text + "”"] : [])].join(", ") || "(none)";
    if (answer.answers.length === 1) return part(answer.answers[0]);
    return answer.answers.map((item) => item.question + " " + part(item)).join("; ");
  }

  function capital(text) {
    return text ? text.charAt(0).toUpperCase() + text.slice(1) + "." : "";
  }

  function held(name) {
    return name ? " Held for " + name + "'s resume." : "";
  }

  // Which daemon asks, for a question of the fleet inbox ("" for a process's own inbox).
  function asker(d) {
    return d.name + " on " + d.host + ", pid " + d.pid + (d.agent ? ", agent " + d.agent : "");
  }

  function setStatus(text, alert) {
    if (status.textContent !== text) status.textContent = text;  // announced once, not per retry
    status.classList.toggle("alert", Boolean(alert));
  }

  // The empty note, the title's count: what is waiting, as far as this page knows.
  function refresh() {
    const waiting = list.querySelectorAll("li.card:not(.gone):not(.abandoned)").length;
    empty.hidden = connection !== "live" || waiting > 0;
    const away = connection === "stopped" || connection === "bad-token";
    document.title = (waiting && !away ? "(" + waiting + ") " : "") + TITLE + (away ? " (not connected)" : "");
  }

  const clock = new Intl.DateTimeFormat(undefined, { hour: "numeric", minute: "2-digit", second: "2-digit" });

  // One question of a card: a fieldset with its legend, its options (radio buttons for one
  // choice, checkboxes for several, within its bounds), its own answer, its Skip control.
  // `prefix` makes its ids; `several` says whether the card has more questions than this one.
  function field(item, prefix, several, draft, form) {
    const multi = Boolean(item.multiSelect && item.options.length);
    const kind = multi ? "checkbox" : "radio";
    const boxes = [];
    const rows = [];
    let own = null;
    let custom = null;
    let skip = null;
    const chosen = (value) => draft ? draft.choices.includes(value) : false;
    item.options.forEach((o, i) => {
      const id = prefix + "-o" + i;
      const box = el("input", { type: kind, name: prefix, id: id, value: String(i),
                                checked: draft ? chosen(String(i)) : o.recommended,
                                "aria-describedby": o.description ? id + "-d" : null });
      boxes.push(box);
      rows.push(el("div", { class: "option" }, [
        box,
        el("label", { for: id }, [
          el("span", { text: o.label }),
          o.recommended ? el("span", { class: "badge", text: "Recommended" }) : null,
          o.description ? el("span", { class: "desc", id: id + "-d", text: o.description }) : null,
        ]),
      ]));
    });
    const error = el("p", { class: "error", id: prefix + "-error", role: "alert" });
    if (item.allowCustom && item.options.length) {
      const id = prefix + "-own";
      own = el("input", { type: kind, name: prefix, id: id, value: "own", checked: chosen("own") });
      custom = el("input", { type: "text", id: id + "-text", "aria-label": "Type your own answer", maxlength: "20000",
                             placeholder: "Type your own answer", autocomplete: "off" });
      rows.push(el("div", { class: "option" }, [own, el("label", { for: id }, [el("span", { text: "Your own answer" }), custom])]));
      custom.addEventListener("input", () => {
        if (own.checked || !custom.value) return;
        if (multi && count() >= item.maxSelections) { error.textContent = tooMany(); return; }
        own.checked = true;
      });
    } else if (!item.options.length) {
      custom = el("textarea", { id: prefix + "-text", maxlength: "20000", "aria-describedby": prefix + "-hint" });
      rows.push(el("label", { for: prefix + "-text", text: "Your answer" }), custom,
                el("p", { class: "hint", id: prefix + "-hint", text: "Ctrl+Enter sends." }));
      custom.addEventListener("keydown", (e) => {
        if (e.key === "Enter" && (e.ctrlKey || e.metaKey)) { e.preventDefault(); form.requestSubmit(); }
      });
    }
    if (custom && draft) custom.value = draft.text || "";
    const boxesAndOwn = own ? [...boxes, own] : boxes;
    const count = () => boxesAndOwn.filter((box) => box.checked).length;
    const named = (text) => several ? item.question + " — " + text + "." : capital(text);
    const tooMany = () => named("at most " + item.maxSelections + (item.maxSelections === 1 ? " choice" : " choices")
      + ": uncheck one first");
    if (multi) {
      // The bounds are kept as the human clicks: a box past the most is unchecked again, saying why.
      for (const box of boxesAndOwn) {
        box.addEventListener("change", () => {
          if (box.checked && count() > item.maxSelections) { box.checked = false; error.textContent = tooMany(); }
          else error.textContent = "";
        });
      }
    }
    if (item.allowSkip) {
      skip = el("input", { type: "checkbox", id: prefix + "-skip", checked: Boolean(draft && draft.skip) });
      rows.push(el("div", { class: "option skip" }, [skip, el("label", { for: prefix + "-skip", text: "Skip this question" })]));
      const follow = () => {
        for (const control of [...boxesAndOwn, custom]) if (control) control.disabled = skip.checked;
        if (skip.checked) error.textContent = "";
      };
      skip.addEventListener("change", follow);
      follow();
    }
    const rule = several || multi || item.allowSkip
      ? el("p", { class: "rule", id: prefix + "-rule", text: capital(item.hint) }) : null;
    const legend = several
      ? el("legend", { id: prefix + "-title" }, [
          item.header ? el("span", { class: "chip", text: item.header }) : null,
          item.header ? document.createTextNode(" ") : null,  // read as two words, not one
          el("span", { class: "text", text: item.question }),
        ])
      : el("legend", { id: prefix + "-title", text: item.question });
    const describedBy = [rule ? prefix + "-rule" : null, prefix + "-error"].filter(Boolean).join(" ");
    const fieldset = el("fieldset", { class: multi ? "question multi" : "question", "data-question": item.id,
                                      "aria-describedby": describedBy },
                        [legend, rule, ...rows, error]);
    return {
      item, fieldset,
      draft: () => ({ choices: boxesAndOwn.filter((box) => box.checked).map((box) => box.value),
                      text: custom ? custom.value : "", skip: Boolean(skip && skip.checked) }),
      // This question's answer as the API takes it, or a refusal said in the page (and focus
      // put where it is fixed): the bounds and the rules of the seam, before anything is sent.
      body: () => {
        const refuse = (text, where) => { error.textContent = text; (where || boxesAndOwn[0] || custom).focus(); return null; };
        if (skip && skip.checked) return { skip: true };
        const typed = custom ? custom.value : "";
        if (multi) {
          const picked = boxes.filter((box) => box.checked).map((box) => Number(box.value));
          const total = picked.length + (own && own.checked ? 1 : 0);
          if (total < item.minSelections) {
            return refuse(named("pick at least " + item.minSelections + " (" + total + " chosen)"));
          }
          if (total > item.maxSelections) return refuse(tooMany());
          if (own && own.checked && !typed.trim()) return refuse(named("type your own answer, or uncheck it"), custom);
          return own && own.checked ? { options: picked, text: typed } : { options: picked };
        }
        const checked = boxesAndOwn.find((box) => box.checked);
        if (item.options.length && (!checked || checked.value !== "own")) {
          if (!checked) return refuse(named("choose an option"));
          return { option: Number(checked.value) };
        }
        if (!typed.trim()) return refuse(named("type an answer first"), custom);
        return { text: typed };
      },
      clear: () => { error.textContent = ""; },
    };
  }

  // -- approvals -------------------------------------------------------------------------
  // An ask carrying `approval` (a tool call put to the human) is shown as the call: the tool,
  // its arguments, the agent's reason, and one button per decision offered. It is answered
  // with the ask's two plain questions (`decision`: the option of the decision; `text`: the
  // reason, the response or the edited arguments), as any client answers it; the server
  // checks the answer again (hotseam.providers._web._approvals) with the same words.

  const DECISION = "decision";
  const TEXT = "text";
  const TYPES = { string: "a string", integer: "an integer", number: "a number", boolean: "true or false",
                  array: "a list", object: "an object", null: "null" };
  const MODES = {
    reject: { label: "The reason (the model is told why)", send: "Send rejection", needs: "reject needs the reason, for the model" },
    respond: { label: "The response (given to the model as the tool's result)", send: "Send response",
               needs: "respond needs the response, for the model" },
    edit: { label: "The arguments to run with (JSON)", send: "Run with these arguments",
            needs: "edit needs the edited arguments, as a JSON object" },
    never: { label: "The reason, if any (the model is told why)", send: "Send: always reject", needs: null },
  };
  const AT_ONCE = ["approve", "always"];  // decisions sent with no text (Always allow adds a rule)
  const RULED = ["always", "never"];      // decisions that add a rule (the Rules list follows)

  // The approval of `q` when the page can render it: its decisions are the options of the
  // `decision` question, in order (else the ask is shown as its plain questions).
  function approvalOf(q) {
    const a = q.approval;
    if (!a || !Array.isArray(a.decisions)) return null;
    const decision = q.questions.find((item) => item.id === DECISION);
    if (!decision || decision.options.length !== a.decisions.length) return null;
    const text = q.questions.find((item) => item.id === TEXT) || null;
    if (q.questions.length !== (text ? 2 : 1)) return null;
    if (a.decisions.some((d) => !AT_ONCE.includes(d)) && !text) return null;
    if (a.decisions.some((d) => !AT_ONCE.includes(d) && !(d in MODES))) return null;  // one this page does not know
    return { approval: a, decision, text };
  }

  function isType(kind, value) {
    if (kind === "null") return value === null;
    if (kind === "boolean") return typeof value === "boolean";
    if (kind === "integer") return Number.isInteger(value);
    if (kind === "number") return typeof value === "number";
    if (kind === "string") return typeof value === "string";
    if (kind === "array") return Array.isArray(value);
    if (kind === "object") return value !== null && typeof value === "object" && !Array.isArray(value);
    return false;
  }

  function kindOf(value) {
    for (const kind of ["null", "boolean", "integer", "number", "string", "array", "object"]) {
      if (isType(kind, value)) return TYPES[kind];
    }
    return typeof value;
  }

  // The JSON types a field takes, or null when its schema does not say simply ($ref, ...).
  function typesOf(field) {
    let given = field.type;
    if (typeof given === "string") given = [given];
    if (Array.isArray(given)) { const kinds = given.filter((k) => k in TYPES); return kinds.length ? kinds : null; }
    const union = field.anyOf || field.oneOf;
    if (Array.isArray(union)) {
      const kinds = [];
      for (const branch of union) {
        const plain = branch && typeof branch === "object" && Object.keys(branch).every((k) => k === "type");
        const inner = plain ? typesOf(branch) : null;
        if (!inner) return null;
        kinds.push(...inner);
      }
      return kinds.length ? kinds : null;
    }
    return null;
  }

  const same = (a, b) => JSON.stringify(a) === JSON.stringify(b);

  // The first thing `value` breaks of what `schema` says simply (the server's schema_problem).
  function schemaProblem(schema, value) {
    const properties = schema.properties && typeof schema.properties === "object" ? schema.properties : {};
    for (const name of Array.isArray(schema.required) ? schema.required : []) {
      if (typeof name === "string" && !Object.prototype.hasOwnProperty.call(value, name)) return "missing required field '" + name + "'";
    }
    if (schema.additionalProperties === false) {
      for (const name of Object.keys(value)) {
        if (!Object.prototype.hasOwnProperty.call(properties, name)) return "unknown field '" + name + "'";
      }
    }
    for (const [name, item] of Object.entries(value)) {
      const field = Object.prototype.hasOwnProperty.call(properties, name) ? properties[name] : null;
      if (!field || typeof field !== "object") continue;
      if (Array.isArray(field.enum) && !field.enum.some((e) => same(e, item))) {
        return "field '" + name + "' must be one of " + field.enum.map((e) => JSON.stringify(e)).join(", ");
      }
      if ("const" in field && !same(field.const, item)) return "field '" + name + "' must be " + JSON.stringify(field.const);
      const kinds = typesOf(field);
      if (kinds && !kinds.some((k) => isType(k, item))) {
        return "field '" + name + "' must be " + kinds.map((k) => TYPES[k]).join(" or ") + " (got " + kindOf(item) + ")";
      }
    }
    return null;
  }

  // Edited arguments typed in the page: null when they may be sent, else why not.
  function editProblem(approval, typed) {
    let value;
    try { value = JSON.parse(typed); } catch (bad) { return "the edited arguments are not JSON: " + bad.message; }
    if (value === null || typeof value !== "object" || Array.isArray(value)) {
      return "the edited arguments must be a JSON object, got " + (Array.isArray(value) ? "a list" : kindOf(value));
    }
    const problem = approval.input_schema ? schemaProblem(approval.input_schema, value) : null;
    return problem ? "the edited arguments are not valid input for " + approval.tool + ": " + problem : null;
  }

  // The approval part of a card: the call, and a button per decision; a decision that needs
  // a text opens a box for it (prefilled with the arguments for an edit) with its own Send.
  function approvalView(q, view, base, draft, form, submit) {
    const { approval, decision } = view;
    const args = JSON.stringify(approval.arguments, null, 2);
    const texts = { edit: args, reject: "", respond: "", ...((draft && draft.texts) || {}) };
    let mode = null;  // the decision whose text is being typed
    const lines = decision.question.split("\n");
    const again = lines.slice(1).join("\n");  // why an earlier answer was refused (a re-ask)
    const label = el("label", { for: base + "-details" });
    const box = el("textarea", { id: base + "-details", class: "details", maxlength: "20000", spellcheck: "false",
                                 "aria-describedby": base + "-details-error " + base + "-details-hint" });
    const problem = el("p", { class: "error", id: base + "-details-error", role: "alert" });
    const hint = el("p", { class: "hint", id: base + "-details-hint", text: "Ctrl+Enter sends." });
    const sendButton = el("button", { type: "submit", class: "answer" });
    const panel = el("div", { class: "details-panel", hidden: true }, [label, box, hint, problem, el("div", { class: "actions" }, [sendButton])]);
    const buttons = approval.decisions.map((value, i) => {
      const button = el("button", { type: "button", class: value === "approve" ? "answer decide" : "decide",
                                    "data-decision": value, text: decision.options[i].label,
                                    title: decision.options[i].description || null });
      button.addEventListener("click", () => {
        if (AT_ONCE.includes(value)) { submit(answer(value, null)); return; }
        openMode(value);
        box.focus();
      });
      return button;
    });
    function openMode(value) {
      if (mode) texts[mode] = box.value;
      mode = value;
      problem.textContent = "";
      for (const b of buttons) b.setAttribute("aria-pressed", String(b.dataset.decision === mode));
      panel.hidden = !mode;
      if (!mode) return;
      label.textContent = MODES[mode].label;
      sendButton.textContent = MODES[mode].send;
      box.value = texts[mode];
      box.classList.toggle("code", mode === "edit");
    }
    box.addEventListener("input", () => { problem.textContent = ""; });
    box.addEventListener("keydown", (e) => {
      if (e.key === "Enter" && (e.ctrlKey || e.metaKey)) { e.preventDefault(); form.requestSubmit(); }
    });
    function answer(value, typed) {
      const answers = { [DECISION]: { option: approval.decisions.indexOf(value) } };
      if (view.text) answers[TEXT] = typed === null ? { skip: true } : { text: typed };
      return { answers };
    }
    const fieldset = el("fieldset", { class: "approval", "aria-labelledby": base + "-title" }, [
      el("legend", { id: base + "-title" }, [document.createTextNode("Allow "), el("code", { class: "tool", text: approval.tool }), document.createTextNode("?")]),
      approval.reason ? el("p", { class: "reason" }, [el("span", { class: "label", text: "Reason: " }), el("span", { text: approval.reason })]) : null,
      el("pre", { class: "arguments", "aria-label": "Arguments", tabindex: "0", text: args }),
      again ? el("p", { class: "again", role: "alert", text: again }) : null,
      el("div", { class: "actions decisions" }, buttons),
      panel,
    ]);
    openMode(draft && draft.mode in MODES ? draft.mode : null);  // as it was, when asked again
    return {
      fieldset,
      draft: () => { if (mode) texts[mode] = box.value; return { mode, texts: { ...texts } }; },
      // The answer of the open decision, or a refusal said in the page (focus on the box).
      body: () => {
        if (!mode) return null;
        const typed = box.value;
        const refuse = (text) => { problem.textContent = capital(text); box.focus(); return null; };
        if (!typed.trim()) return MODES[mode].needs ? refuse(MODES[mode].needs) : answer(mode, null);
        if (mode === "edit") { const why = editProblem(approval, typed); if (why) return refuse(why); }
        return answer(mode, typed);
      },
      // What was decided, in words: from this tab's body, or from what pages are told.
      said: (body) => decided(approval.decisions[body.answers[DECISION].option], body.answers[TEXT] && body.answers[TEXT].text),
      saidOf: (shownAnswer) => {
        const items = Object.fromEntries(((shownAnswer && shownAnswer.answers) || []).map((item) => [item.id, item]));
        const labels = (items[DECISION] && items[DECISION].labels) || [];
        const i = decision.options.findIndex((o) => o.label === labels[0]);
        return i < 0 ? null : decided(approval.decisions[i], items[TEXT] && items[TEXT].text);
      },
      // Whether a decision adds a rule (Always allow, Always reject): this tab's, or one told.
      ruled: (body) => RULED.includes(approval.decisions[body.answers[DECISION].option]),
      ruledOf: (shownAnswer) => {
        const item = ((shownAnswer && shownAnswer.answers) || []).find((entry) => entry.id === DECISION);
        const i = item ? decision.options.findIndex((o) => o.label === (item.labels || [])[0]) : -1;
        return i >= 0 && RULED.includes(approval.decisions[i]);
      },
    };
  }

  function decided(value, typed) {
    if (value === "approve") return "approved as shown";
    if (value === "edit") return "approved with edited arguments";
    if (value === "always") return "always allowed (a rule was added)";
    if (value === "never") return "always rejected (a rule was added)" + (typed ? ": “" + typed + "”" : "");
    return (value === "reject" ? "rejected: “" : "responded: “") + (typed || "") + "”";
  }

  // What this tab answered, in the shape the server tells other pages (for its own note).
  function answered(fields, body) {
    const one = (item, b) => {
      if (b.skip) return { question: item.question, skipped: "skipped" };
      const picked = b.options || (b.option !== undefined ? [b.option] : []);
      const result = { question: item.question, labels: picked.slice().sort((x, y) => x - y).map((i) => item.options[i].label) };
      if (b.text !== undefined) result.text = b.text;
      return result;
    };
    return { answers: fields.map((f) => one(f.item, body.answers[f.item.id])) };
  }

  function render(q) {
    const base = "q-" + q.id;
    const who = q.agent ? (q.agent.name || q.agent.id) : "an agent";
    const asked = clock.format(new Date(q.askedAt * 1000));
    const draft = drafts.get(fingerprint(q)) || {};
    const items = q.questions;
    const several = items.length > 1;
    const error = el("p", { class: "error", role: "alert" });
    const hold = el("p", { class: "hold", role: "status" });
    const answerButton = el("button", { type: "submit", class: "answer", text: "Answer" });
    const dismissButton = el("button", { type: "button", class: "dismiss", text: "Dismiss" });
    const clearButton = el("button", { type: "button", class: "clear", text: "Clear", hidden: true });
    const situation = el("p", { class: "situation", role: "status" });
    const form = el("form", { "aria-labelledby": several ? base + "-count" : base + "-title", novalidate: true });
    const asApproval = approvalOf(q);
    const view = asApproval
      ? approvalView(q, asApproval, base, draft.approval, form, (body) => send(card, "answer", body, error)) : null;
    const fields = view ? [] : items.map((item, i) => field(item, several ? base + "-" + i : base, several, draft[item.id], form));
    for (const f of fields) form.appendChild(f.fieldset);
    if (view) form.appendChild(view.fieldset);
    answerButton.hidden = Boolean(view);  // an approval is sent by its decision's own button
    form.append(el("div", { class: "actions" }, [answerButton, dismissButton, clearButton]), situation, hold, error);
    const daemonState = el("span", { class: "daemon-state" });
    const heading = view ? el("h2", { text: "Approval" })
      : several ? el("h2", { id: base + "-count", text: items.length + " questions" })
      : items[0].header ? el("h2", { text: items[0].header }) : null;
    const card = el("li", { class: view ? "card approval" : several ? "card several" : "card", id: base, "data-id": q.id }, [
      el("p", { class: "meta", text: "Asked by " + who + " at " + asked }),
      q.daemon ? el("p", { class: "daemon" }, [el("span", { text: asker(q.daemon) }), daemonState]) : null,
      heading,
      form,
    ]);
    card.fingerprint = fingerprint(q);
    card.draft = view ? () => ({ approval: view.draft() }) : () => Object.fromEntries(fields.map((f) => [f.item.id, f.draft()]));
    card.shownOf = (body) => answered(fields, body);
    card.said = view ? view.said : null;      // an approval's answer, in words
    card.saidOf = view ? view.saidOf : null;
    card.ruled = view ? view.ruled : null;    // does an answer add an approval rule?
    card.ruledOf = view ? view.ruledOf : null;
    card.enable = (on) => {
      const live = on && !card.abandoned;
      for (const f of fields) f.fieldset.disabled = !live;
      if (view) view.fieldset.disabled = !live;
      answerButton.disabled = dismissButton.disabled = !live || Boolean(card.sending);
      clearButton.disabled = !on || Boolean(card.sending);
    };
    card.holdNote = hold;
    // Who asks and what can be done, from the latest word on the question (in place).
    card.update = (latest) => {
      const d = latest.daemon;
      card.heldFor = d && !d.up ? d.name : null;
      card.abandoned = latest.state === "abandoned";
      card.classList.toggle("down", Boolean(card.heldFor));
      card.classList.toggle("abandoned", card.abandoned);
      if (d) daemonState.textContent = d.up ? " — up" : " — down" + (d.stopped ? " (stopped)" : " (no heartbeat)");
      situation.textContent = card.abandoned
        ? "Nobody owns this question any more: its run was abandoned, and nothing will read an answer. Clear it."
        : card.heldFor ? card.heldFor + " is down: an answer is held for its resume." : "";
      answerButton.hidden = card.abandoned || Boolean(view);
      dismissButton.hidden = card.abandoned;
      clearButton.hidden = !card.abandoned;
      card.enable(!card.classList.contains("held"));
    };
    // One Answer for the whole ask: every question is checked in the page first (the first
    // refused one says why and takes the focus); the server checks them all again.
    form.addEventListener("submit", (e) => {
      e.preventDefault();
      if (card.classList.contains("held") || card.abandoned) return;
      error.textContent = "";
      if (view) {
        const body = view.body();
        if (body) send(card, "answer", body, error);
        return;
      }
      for (const f of fields) f.clear();
      const bodies = [];
      for (const f of fields) {
        const body = f.body();
        if (!body) return;
        bodies.push(body);
      }
      const body = { answers: Object.fromEntries(fields.map((f, i) => [f.item.id, bodies[i]])) };
      send(card, "answer", body, error);
    });
    dismissButton.addEventListener("click", () => send(card, "dismiss", {}, error));
    clearButton.addEventListener("click", () => send(card, "clear", {}, error));
    card.update(q);
    return card;
  }

  async function send(card, action, body, error) {
    error.textContent = "";
    card.sending = action;
    card.enable(false);
    try {
      const response = await fetch("api/questions/" + encodeURIComponent(card.dataset.id) + "/" + action, {
        method: "POST",
        headers: { "content-type": "application/json", "x-hotseam-token": token, "x-hotseam-client": client },
        body: JSON.stringify(body),
        cache: "no-store",
      });
      const data = await response.json().catch(() => ({}));
      if (response.ok) {
        drafts.delete(card.fingerprint);
        if (action === "answer" && card.ruled && card.ruled(body)) rulesSoon();
        const said = card.said ? capital(card.said(body)) : "Answered: " + shown(card.shownOf(body)) + ".";
        finish(card.dataset.id, action === "answer" ? said + held(data.heldFor)
          : action === "clear" ? "Cleared." : "Dismissed.");
        return;
      }
      const failure = data.error || {};
      const message = failure.message || "HTTP " + response.status;
      if (response.status === 409 && failure.code === "NOT_ABANDONED") {
        error.textContent = message;
      } else if (response.status === 409 || response.status === 404) {
        finish(card.dataset.id, failure.code === "ALREADY_ANSWERED"
          ? removedNote({ reason: "answered", client: failure.client, answer: failure.answer,
                          by: failure.by, heldFor: failure.heldFor }, card)
          : "No longer pending: " + message);
        return;
      }
      error.textContent = message;
    } catch (failure) {
      error.textContent = "Could not reach hotseam: " + failure.message;
    }
    card.sending = null;
    card.enable(!card.classList.contains("held"));
  }

  // Who decided a question, when not this tab: another tab of this inbox, another process
  // (`by`: another inbox, a daemon's own page), or a script that did not say.
  function elsewhere(event) {
    if (event.by) return "elsewhere (by " + event.by + ")";
    return event.client ? "in another tab" : "elsewhere (by a script or another client)";
  }

  // What a removed event says, from this tab's point of view.
  function removedNote(event, card) {
    const mine = event.client === client && !event.by;
    const approval = event.reason === "answered" && card && card.saidOf ? card.saidOf(event.answer) : null;
    if (approval) return (mine ? capital(approval) : "Answered " + elsewhere(event) + ": " + approval + ".") + held(event.heldFor);
    if (event.reason === "answered") {
      return (mine ? "Answered" : "Answered " + elsewhere(event)) + ": " + shown(event.answer) + "." + held(event.heldFor);
    }
    if (event.reason === "dismissed") return mine ? "Dismissed." : "Dismissed " + elsewhere(event) + ".";
    if (event.reason === "timed_out") return "Timed out: nobody answered in time.";
    return sentence(event.note);
  }

  function place(card, before) {
    if (before) before.replaceWith(card); else list.appendChild(card);
  }

  function add(q) {
    const known = cards.get(q.id);
    if (known && !known.classList.contains("gone")) {
      if (known.classList.contains("held")) release(known);
      return;
    }
    // The same question from a restarted hotseam (a new id): it takes the old card's place.
    let before = known || null;
    if (!before) {
      const same = fingerprint(q);
      for (const [id, card] of cards) {
        if (card.fingerprint === same && (card.classList.contains("held") || card.stale)) {
          before = card;
          cards.delete(id);
          break;
        }
      }
    }
    if (before) {
      clearTimeout(before.timer);
      if (!before.classList.contains("gone")) drafts.set(before.fingerprint, before.draft());
    }
    const card = render(q);
    cards.set(q.id, card);
    place(card, before);
  }

  function hold(card, why) {
    if (card.classList.contains("gone")) return;
    clearTimeout(card.timer);
    card.classList.add("held");
    card.setAttribute("aria-disabled", "true");
    card.enable(false);
    card.holdNote.textContent = why;
  }

  function release(card) {
    clearTimeout(card.timer);
    card.classList.remove("held");
    card.removeAttribute("aria-disabled");
    card.holdNote.textContent = "";
    card.enable(true);
  }

  function holdAll(why) {
    for (const card of cards.values()) hold(card, why);
    refresh();
  }

  function finish(id, note, linger) {
    const card = cards.get(id);
    if (!card || card.classList.contains("gone")) return;
    clearTimeout(card.timer);
    const hadFocus = card.contains(document.activeElement);
    if (card.draft) drafts.set(card.fingerprint, card.draft());
    card.classList.remove("held");
    card.classList.add("gone");
    card.stale = Boolean(linger);
    card.replaceChildren(el("p", { class: "note", role: "status", text: note }));
    if (hadFocus) {
      const next = list.querySelector("li.card:not(.gone):not(.held) input, li.card:not(.gone):not(.held) textarea");
      if (next) next.focus();
    }
    refresh();
    if (!linger) card.timer = setTimeout(() => forget(id, card), NOTE_MS);
  }

  function forget(id, card) {
    card.remove();
    if (cards.get(id) === card) cards.delete(id);
    refresh();
  }

  function snapshot(questions) {
    const started = performance.now();
    const live = new Set(questions.map((q) => q.id));
    questions.forEach((q) => add(q));  // first: a question back from a restart takes its old place
    for (const [id, card] of cards) {
      if (live.has(id)) continue;
      if (card.stale) {  // a note from before hotseam came back: its question may follow
        clearTimeout(card.timer);
        card.timer = setTimeout(() => forget(id, card), RETURN_MS);
      } else if (card.classList.contains("held")) {
        clearTimeout(card.timer);
        card.timer = setTimeout(() => finish(id, "No longer asked."), RETURN_MS);
      } else if (!card.classList.contains("gone")) finish(id, "No longer pending.");
    }
    refresh();
    // Read by bench/web.py: building the cards, and the first frame that shows them.
    window.__hotseamSnapshotMs = performance.now() - started;
    requestAnimationFrame(() => setTimeout(() => {
      window.__hotseamPainted = { received: started, painted: performance.now() };
    }));
  }

  function onEvent(event) {
    if (event.type === "snapshot") { snapshot(event.questions); loadRules(); }
    else if (event.type === "added") { add(event.question); refresh(); }
    else if (event.type === "changed") {
      const card = cards.get(event.question.id);
      if (card && !card.classList.contains("gone")) card.update(event.question); else add(event.question);
      refresh();
    }
    else if (event.type === "removed") {
      const card = cards.get(event.id);
      if (!card) return;
      if (event.reason === "answered" && card.ruledOf && card.ruledOf(event.answer)) rulesSoon();
      if (event.reason !== "withdrawn") { finish(event.id, removedNote(event, card)); return; }
      // A reload withdraws a question, then asks it again: hold it in place meanwhile.
      hold(card, "On hold: not answerable right now.");
      card.timer = setTimeout(() => finish(event.id, removedNote(event)), HOLD_MS);
      refresh();
    } else if (event.type === "closing") {
      connection = "connecting";
      setStatus("The inbox closed (" + event.note + "); reconnecting…", true);
      holdAll("On hold while the inbox reconnects: not answerable right now.");
    }
  }

  // -- approval rules ---------------------------------------------------------------------
  // The rules in force ("always allow" or "always reject" a tool, from a card's Always
  // decision or `hotseam approvals`): listed whenever the page lists its questions again,
  // and after an Always decision (the gate adds the rule once it has the answer, so the list
  // is read again until the rule is there). Revoke asks to be clicked twice, in the page.

  const rulesSection = document.getElementById("rules");
  const ruleList = document.getElementById("rule-list");
  const rulesWhere = document.getElementById("rules-where");
  const rulesError = document.getElementById("rules-error");
  const WHERE = {
    journal: "Kept in the journal: they decide the calls of every daemon writing to it ('hotseam approvals list' shows them too).",
    process: "Kept by this process: they end when it stops.",
  };
  const when = new Intl.DateTimeFormat(undefined, { month: "short", day: "numeric", hour: "numeric", minute: "2-digit", second: "2-digit" });
  let rulesRead = 0;        // the latest listing wins over a slower earlier one
  let ruleIds = new Set();  // the rules shown
  let confirming = null;    // the rule whose Revoke asks "sure?"
  let rulesTimer = null;

  async function loadRules() {
    const read = ++rulesRead;
    let response = null;
    let data = {};
    try {
      response = await fetch("api/rules", { headers: { "x-hotseam-token": token }, cache: "no-store" });
      data = await response.json().catch(() => ({}));
    } catch (failure) {
      data = { error: { message: failure.message } };
    }
    if (read !== rulesRead) return null;
    if (!response || !response.ok) {
      const message = (data.error && data.error.message) || "HTTP " + (response && response.status);
      rulesError.textContent = "The rules could not be listed: " + message;
      rulesSection.hidden = false;
      return null;
    }
    rulesError.textContent = "";
    showRules(data.source, data.rules || []);
    return data.rules || [];
  }

  // After an Always decision: read the rules again until a new one is there (a few seconds).
  function rulesSoon() {
    clearTimeout(rulesTimer);
    const before = new Set(ruleIds);
    let wait = 250;
    const again = async () => {
      const rules = await loadRules();
      if (rules && rules.some((rule) => !before.has(rule.id))) return;
      if (wait > 4000) return;
      rulesTimer = setTimeout(again, wait);
      wait *= 2;
    };
    again();
  }

  function uses(count) {
    return count === 0 ? "Not used yet" : "Used " + count + (count === 1 ? " time" : " times");
  }

  function showRules(source, rules) {
    ruleIds = new Set(rules.map((rule) => rule.id));
    if (!ruleIds.has(confirming)) confirming = null;
    rulesWhere.textContent = WHERE[source] || "";
    ruleList.replaceChildren(...rules.filter((rule) => rule.active).map(ruleItem));
    rulesSection.hidden = !ruleList.children.length && !rulesError.textContent;
  }

  function ruleItem(rule) {
    const base = "rule-" + rule.id;
    const error = el("p", { class: "error", role: "alert" });
    const actions = el("div", { class: "actions" });
    const added = "added " + when.format(new Date(rule.created_at * 1000)) + (rule.created_by ? " by " + rule.created_by : "");
    const item = el("li", { class: "rule-item", id: base, "data-rule": rule.id, "aria-labelledby": base + "-what" }, [
      el("p", { class: "what", id: base + "-what", text: rule.text }),
      el("p", { class: "meta", text: uses(rule.uses) + " · " + added + (rule.reason ? " · reason: “" + rule.reason + "”" : "") }),
      actions,
      error,
    ]);
    const ask = () => {
      confirming = null;
      const revoke = el("button", { type: "button", class: "revoke", text: "Revoke", "aria-describedby": base + "-what" });
      revoke.addEventListener("click", () => { confirming = rule.id; sure(); actions.querySelector("button.answer").focus(); });
      actions.replaceChildren(revoke);
    };
    const sure = () => {
      const yes = el("button", { type: "button", class: "answer", text: "Yes, revoke" });
      const keep = el("button", { type: "button", class: "dismiss", text: "Keep it" });
      yes.addEventListener("click", () => revokeRule(rule, yes, keep, error));
      keep.addEventListener("click", () => { ask(); actions.querySelector("button").focus(); });
      actions.replaceChildren(el("span", { text: "Revoke this rule? The calls it decides are asked again." }), yes, keep);
    };
    if (confirming === rule.id) sure(); else ask();
    return item;
  }

  async function revokeRule(rule, yes, keep, error) {
    error.textContent = "";
    yes.disabled = keep.disabled = true;
    try {
      const response = await fetch("api/rules/" + encodeURIComponent(rule.id) + "/revoke", {
        method: "POST",
        headers: { "content-type": "application/json", "x-hotseam-token": token, "x-hotseam-client": client },
        body: "{}",
        cache: "no-store",
      });
      const data = await response.json().catch(() => ({}));
      if (response.ok || response.status === 404) {
        confirming = null;
        await loadRules();
        return;
      }
      error.textContent = (data.error && data.error.message) || "HTTP " + response.status;
    } catch (failure) {
      error.textContent = "Could not reach hotseam: " + failure.message;
    }
    yes.disabled = keep.disabled = false;
  }

  function connect() {
    source = new EventSource("api/events?token=" + encodeURIComponent(token));
    source.onopen = () => {
      retry = 250;
      connection = "live";
      setStatus("Live: new questions appear by themselves.", false);
      refresh();
    };
    source.onmessage = (message) => onEvent(JSON.parse(message.data));
    source.onerror = () => {
      // CONNECTING: the browser tries again by itself (after the stream's "retry:").
      // CLOSED: an HTTP error (a refused token, a reload under way): it gives up; we retry.
      const gaveUp = source.readyState === EventSource.CLOSED;
      if (gaveUp) source.close();
      if (connection === "live") {
        connection = "connecting";
        setStatus("Reconnecting…", false);
        refresh();
      }
      probe(gaveUp);
    };
  }

  // The stream ended or failed: find out why (a reload, a stop, another token) and say so.
  let probing = false;
  async function probe(reconnect) {
    if (probing) { if (reconnect) schedule(retry); return; }
    probing = true;
    let response = null;
    try {
      response = await fetch("api/questions", { headers: { "x-hotseam-token": token }, cache: "no-store" });
    } catch (unreachable) {
      stopped("hotseam is not running: it stopped, or cannot be reached. This page reconnects by itself when it is back.");
    } finally {
      probing = false;
    }
    if (response && response.status === 401) {
      connection = "bad-token";
      setStatus("This page's link is no longer accepted: hotseam was started again with another token. " +
                "Open the inbox's current address: 'hotseam status' shows it.", true);
      for (const [id, card] of cards) {
        if (!card.classList.contains("gone")) finish(id, "Not answerable from this page: its link's token is no longer valid.", true);
      }
      refresh();
      if (reconnect) schedule(5000);
      return;
    }
    if (response && response.status === 503) setStatus("The inbox is being reloaded; reconnecting…", true);
    else if (response && !response.ok) setStatus("hotseam answered HTTP " + response.status + "; retrying…", true);
    if (reconnect) {
      schedule(retry);
      retry = Math.min(retry * 2, 2000);
    }
  }

  function stopped(why) {
    connection = "stopped";
    setStatus(why, true);
    for (const [id, card] of cards) {
      if (!card.classList.contains("gone")) {
        finish(id, "Not answered: hotseam stopped while it was asked. If hotseam asks it again, it comes back here.", true);
      }
    }
    refresh();
  }

  function schedule(ms) {
    setTimeout(connect, ms);
  }

  if (!token) {
    connection = "bad-token";
    setStatus("This link has no ?token=…: open the address hotseam printed, or the one 'hotseam status' shows.", true);
  } else connect();
  refresh();
})();
