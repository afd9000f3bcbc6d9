"""`microctx.annotate(DIR, annotator="NAME")`: the annotation widget for JupyterLab (anywidget, offline).

One item at a time, only the annotator's own assignments, in their seeded order: the record's
title, body and references (the linked issue too, for a duplicate question), the question, one
button per label with its keyboard shortcut, a note, progress, skip and undo. Every action is a
new event in the study's log (an undo takes back the annotator's last label or skip; nothing is
edited). The page is sent the current item and this annotator's progress only: no other
annotator's label or note ever reaches it. The front end is the inline module below, served by
anywidget's JupyterLab extension from the installed package: no CDN, no network.
"""

from __future__ import annotations

import os

import anywidget
import traitlets

from microctx.semantic import events as ev
from microctx.semantic.items import StudyFolder
from microctx.semantic.labels import adjudications

_ESM = r"""
function el(tag, cls, text) { const e = document.createElement(tag); if (cls) e.className = cls;
  if (text !== undefined) e.textContent = text; return e; }
function render({ model, el: root }) {
  root.classList.add("microctx-annotate");
  root.setAttribute("tabindex", "0");
  root.setAttribute("data-lm-suppress-shortcuts", "true");
  root.setAttribute("data-p-suppress-shortcuts", "true");
  let shownItem = null;
  const draw = () => {
    const item = model.get("item"), progress = model.get("progress");
    // a redraw for the same item (a late status or progress change) keeps the note being typed
    const typed = root.querySelector(".microctx-note");
    const kept = typed && shownItem === item.item ? typed.value : "";
    shownItem = item.item;
    root.replaceChildren();
    const bar = el("div", "microctx-progress", `${progress.done} / ${progress.total} ${progress.unit || "labelled"}`);
    root.append(bar);
    if (!item.item) { root.append(el("div", "microctx-done", "Nothing left to do here.")); }
    else {
      root.append(el("div", "microctx-question", item.question_text));
      root.append(el("h3", "microctx-title", `#${item.number} ${item.title}`));
      const body = el("pre", "microctx-body"); body.textContent = item.body; root.append(body);
      if (item.references.length) root.append(el("div", "microctx-refs", "references: " + item.references.map(n => "#" + n).join(" ")));
      if (item.target) {
        root.append(el("h4", "microctx-target-title", `linked issue #${item.target.number} ${item.target.title}`));
        const tb = el("pre", "microctx-body microctx-target-body"); tb.textContent = item.target.body; root.append(tb);
      }
      if (item.given) {
        const given = el("div", "microctx-given", "labels given: ");
        item.given.forEach(g => given.append(el("span", "microctx-given-label", g), " "));
        if (item.notes) given.append(el("div", "microctx-given-notes", "notes: " + item.notes));
        root.append(given);
      }
      const note = el("input", "microctx-note"); note.value = kept;
      note.placeholder = item.given ? "reason (required)" : "note (optional)"; root.append(note);
      const buttons = el("div", "microctx-buttons");
      const send = (msg) => { model.send({ ...msg, item: item.item, note: note.value }); };
      root._note = note;
      item.labels.forEach((label, i) => {
        const b = el("button", "microctx-label", `${label} [${item.shortcuts[i]}]`);
        b.dataset.label = label; b.onclick = () => send({ action: "label", label }); buttons.append(b);
      });
      if (!item.given) {
        const skip = el("button", "microctx-skip", "skip [s]"); skip.onclick = () => send({ action: "skip" });
        buttons.append(skip);
      }
      root.append(buttons);
      root._send = send; root._item = item;
    }
    const undo = el("button", "microctx-undo", "undo [z]"); undo.onclick = () => model.send({ action: "undo" });
    root.append(undo, el("div", "microctx-status", model.get("status")));
  };
  root.addEventListener("keydown", (event) => {
    if (event.target.tagName === "INPUT") return;
    const item = root._item; let handled = true;
    if (item && item.item && item.shortcuts.includes(event.key)) root._send({ action: "label", label: item.labels[item.shortcuts.indexOf(event.key)] });
    else if (event.key === "s" && item && item.item && !item.given) root._send({ action: "skip" });
    else if (event.key === "z") model.send({ action: "undo" });
    else handled = false;
    if (handled) { event.preventDefault(); event.stopPropagation(); }
  });
  model.on("change:item", draw); model.on("change:progress", draw); model.on("change:status", draw);
  draw();
}
export default { render };
"""

_CSS = """
.microctx-annotate { font-family: sans-serif; max-width: 60em; outline: none; }
.microctx-annotate .microctx-body { white-space: pre-wrap; max-height: 24em; overflow: auto; background: #f6f6f6; padding: .5em; }
.microctx-annotate .microctx-question { font-weight: bold; margin: .5em 0; }
.microctx-annotate button { margin: .2em; padding: .3em .8em; }
.microctx-annotate .microctx-note { width: 40em; margin: .3em 0; }
.microctx-annotate .microctx-status { color: #555; font-size: 90%; }
"""


class Annotator(anywidget.AnyWidget):
    _esm = traitlets.Unicode(_ESM).tag(sync=True)
    _css = traitlets.Unicode(_CSS).tag(sync=True)
    item = traitlets.Dict({}).tag(sync=True)
    progress: traitlets.Dict = traitlets.Dict({"done": 0, "total": 0}).tag(sync=True)
    status = traitlets.Unicode("").tag(sync=True)

    def __init__(self, folder: str | os.PathLike, annotator: str):
        super().__init__()
        self.folder = StudyFolder(folder)
        self.annotator = annotator
        self.order = self._initial_order()
        study = self.folder.study()
        self.questions = {q.id: q for q in study.question}
        self.on_msg(self._on_message)
        self._refresh()

    def _initial_order(self) -> list[str]:
        return self.folder.assigned(self.annotator)

    def _mine(self) -> dict[str, dict]:
        """This annotator's labels and skips in force (nobody else's events are read into the page)."""
        events = [
            e
            for e in ev.read(self.folder.events_path)
            if e["annotator"] == self.annotator and e["guideline_version"] == self.folder.guideline_version
        ]
        return {item: e for (_, item), e in ev.current_labels(events).items()}

    def _refresh(self, status: str = "") -> None:
        mine = self._mine()
        done = sum(1 for name in self.order if name in mine and mine[name]["kind"] == "label")
        following = next((name for name in self.order if name not in mine), None)
        self.item = self._shown(following) if following else {}
        self.progress = {"done": done, "total": len(self.order), "skipped": sum(1 for e in mine.values() if e["kind"] == "skip")}
        self.status = status

    def _shown(self, name: str) -> dict:
        row = self.folder.items[name]
        record = self.folder.records[row["record_id"]]
        q = self.questions[row["question"]]
        shown = {
            "item": name,
            "question_text": q.text,
            "labels": list(q.labels),
            "shortcuts": list(q.shortcuts),
            "number": record["number"],
            "title": record["title"],
            "body": record["body"],
            "references": record["references"],
            "target": None,
        }
        target = self.folder.records.get(f"issue-{row['target']}") if "target" in row else None
        if target:
            shown["target"] = {"number": target["number"], "title": target["title"], "body": target["body"]}
        return shown

    def _on_message(self, _widget, content: dict, _buffers) -> None:
        action = content.get("action")
        base = {"annotator": self.annotator, "guideline_version": self.folder.guideline_version}
        if action == "undo":
            last = ev.last_undoable(ev.read(self.folder.events_path), self.annotator)
            if last is None:
                return self._refresh("nothing to undo")
            ev.append(self.folder.events_path, [{**base, "item": last["item"], "kind": "undo", "undoes": last["id"]}])
            return self._refresh(f"undone: {last['kind']} of {last['item']}")
        name = content.get("item")
        if name not in self.order or name != self.item.get("item"):
            return self._refresh("that item is not the one shown; nothing recorded")
        if action == "label" and content.get("label") in self.questions[self.folder.items[name]["question"]].labels:
            ev.append(
                self.folder.events_path,
                [
                    {
                        **base,
                        "item": name,
                        "kind": "label",
                        "label": content["label"],
                        "note": str(content.get("note") or "")[:2000],
                    }
                ],
            )
            return self._refresh(f"{name}: {content['label']}")
        if action == "skip":
            ev.append(
                self.folder.events_path, [{**base, "item": name, "kind": "skip", "note": str(content.get("note") or "")[:2000]}]
            )
            return self._refresh(f"{name}: skipped")
        return self._refresh("unknown action; nothing recorded")


def annotate(folder: str | os.PathLike, annotator: str) -> Annotator:
    """The annotation widget for `annotator`'s items of the study folder."""
    return Annotator(folder, annotator)


class Adjudicator(Annotator):
    """The disagreement queue, one item at a time: the labels given side by side (in a seeded order,
    names hidden unless `names`), the annotators' notes, one button per label and a required
    reason; each decision is an `adjudicate` event, undo takes back this adjudicator's last one."""

    def __init__(self, folder: str | os.PathLike, adjudicator: str = "adjudicator", names: bool = False):
        self.names = names
        self._decided = 0
        super().__init__(folder, adjudicator)

    def _initial_order(self) -> list[str]:
        return []  # the queue, read at every refresh

    def _queue(self) -> dict[str, dict]:
        from microctx.semantic.labels import queue_rows

        return {row["item"]: row for row in queue_rows(self.folder, names=self.names)}

    def _refresh(self, status: str = "") -> None:
        queue = self._queue()
        self.order = sorted(queue)
        decided = len(adjudications(self.folder))
        following = self.order[0] if self.order else None
        self.item = (
            {**self._shown(following), "given": queue[following]["given"].split("|"), "notes": queue[following]["notes"]}
            if following
            else {}
        )
        self.progress = {"done": decided, "total": decided + len(self.order), "unit": "decided"}
        self.status = status

    def _on_message(self, _widget, content: dict, _buffers) -> None:
        base = {"annotator": self.annotator, "guideline_version": self.folder.guideline_version}
        if content.get("action") == "undo":
            last = ev.last_undoable(ev.read(self.folder.events_path), self.annotator, ("adjudicate",))
            if last is None:
                return self._refresh("nothing to undo")
            ev.append(self.folder.events_path, [{**base, "item": last["item"], "kind": "undo", "undoes": last["id"]}])
            return self._refresh(f"undone: the decision on {last['item']}")
        name, reason = content.get("item"), str(content.get("note") or "").strip()[:2000]
        if content.get("action") != "label" or name != self.item.get("item"):
            return self._refresh("that item is not the one shown; nothing recorded")
        if content.get("label") not in self.item["labels"] or not reason:
            return self._refresh("a decision needs one of the labels and a reason; nothing recorded")
        ev.append(
            self.folder.events_path, [{**base, "item": name, "kind": "adjudicate", "label": content["label"], "reason": reason}]
        )
        return self._refresh(f"{name}: decided {content['label']}")


def adjudicate(folder: str | os.PathLike, adjudicator: str = "adjudicator", names: bool = False) -> Adjudicator:
    """The adjudication widget: the study's disagreement queue."""
    return Adjudicator(folder, adjudicator, names)
