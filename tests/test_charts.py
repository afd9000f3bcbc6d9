"""Chart tables count what the answers say, and charts render to real, non-blank images.

No notebook runs here (test_reports.py executes them once); these call microctx.reports.charts directly
on the s8f corpus and check the numbers drawn against the answer bundle.
"""

from __future__ import annotations

import struct
import zlib
from collections import Counter

import pandas as pd
import pytest

from microctx.contract.patterns import CUE_WORDS
from microctx.grading import slices
from microctx.reports import charts

PNG_SIGNATURE = b"\x89PNG\r\n\x1a\n"


def decode_png(data: bytes) -> tuple[int, int, list[bytes]]:
    """(width, height, rows of RGBA bytes) of an 8-bit RGBA or RGB non-interlaced PNG (what
    vl-convert and Chromium write), so tests can look at pixels without an imaging library."""
    assert data[:8] == PNG_SIGNATURE, "not a PNG"
    pos, idat, header = 8, b"", None
    while pos < len(data):
        length, kind = struct.unpack(">I4s", data[pos : pos + 8])
        chunk = data[pos + 8 : pos + 8 + length]
        if kind == b"IHDR":
            header = struct.unpack(">IIBBBBB", chunk)
        elif kind == b"IDAT":
            idat += chunk
        pos += 12 + length
    width, height, depth, color, _, _, interlace = header
    assert depth == 8 and color in (2, 6) and interlace == 0, f"unsupported PNG {header}"
    bpp = 4 if color == 6 else 3
    raw = zlib.decompress(idat)
    stride = width * bpp
    rows, prev = [], bytearray(stride)
    for y in range(height):
        kind = raw[y * (stride + 1)]
        line = bytearray(raw[y * (stride + 1) + 1 : (y + 1) * (stride + 1)])
        for i in range(stride):
            a = line[i - bpp] if i >= bpp else 0
            b = prev[i]
            c = prev[i - bpp] if i >= bpp else 0
            if kind == 1:
                line[i] = (line[i] + a) & 255
            elif kind == 2:
                line[i] = (line[i] + b) & 255
            elif kind == 3:
                line[i] = (line[i] + (a + b) // 2) & 255
            elif kind == 4:
                p = a + b - c
                pa, pb, pc = abs(p - a), abs(p - b), abs(p - c)
                line[i] = (line[i] + (a if pa <= pb and pa <= pc else b if pb <= pc else c)) & 255
        prev = line
        if bpp == 3:  # RGB (Chromium's screenshots): add an opaque alpha
            rows.append(b"".join(bytes(line[i : i + 3]) + b"\xff" for i in range(0, stride, 3)))
        else:
            rows.append(bytes(line))
    return width, height, rows


def colour_census(data: bytes, step: int = 3) -> Counter:
    """Counts of opaque pixel colours (every `step`-th pixel of every `step`-th row)."""
    width, height, rows = decode_png(data)
    seen = Counter()
    for row in rows[::step]:
        for x in range(0, width, step):
            r, g, b, a = row[4 * x : 4 * x + 4]
            if a > 200:
                seen[(r, g, b)] += 1
    return seen


def has_colour(census: Counter, rgb: tuple[int, int, int], tolerance: int = 24, at_least: int = 20) -> bool:
    return sum(n for c, n in census.items() if all(abs(c[i] - rgb[i]) <= tolerance for i in range(3))) >= at_least


BLUE, ORANGE, GREEN, RED = (76, 120, 168), (245, 133, 24), (84, 162, 75), (228, 87, 86)


@pytest.fixture(scope="session")
def corpus_frame(s8f_corpus):
    return s8f_corpus.frame()


@pytest.fixture(scope="session")
def records(s8f_corpus):
    return slices.record_table(s8f_corpus)


def test_state_chart_counts_match_aggregates(corpus_frame, s8f_answers):
    spec = charts.state_by_split(corpus_frame).to_dict()
    data = next(iter(spec["datasets"].values()))
    by_state = Counter()
    for row in data:
        by_state[row["state"]] += row["records"]
    assert dict(by_state) == s8f_answers["aggregates"]["state_counts"]


def test_label_counts_list_every_label_with_gold_counts(corpus_frame, s8f_answers):
    counts = charts.label_counts(corpus_frame)
    per_label = counts.groupby("label")["records"].sum().to_dict()
    gold = Counter(label for a in s8f_answers["answers"] for label in set(a["labels"]))
    assert per_label == dict(gold)
    assert set(per_label) == set(s8f_answers["aggregates"]["label_counts"])  # the long tail included
    assert min(per_label.values()) == 1 and max(per_label.values()) > 500  # why the axis is logarithmic


def test_fact_density_matches_answers(records, corpus_frame, s8f_answers):
    density = charts.fact_density(records)
    for kind, field in (("references", "references"), ("duplicate targets", "duplicate_targets")):
        rows = density[(density["kind"] == kind) & (density["n"] > 0)]
        for split in ("train", "tune", "test"):
            expected = sum(1 for a in s8f_answers["answers"] if a["split"] == split and a[field])
            assert rows[rows["split"] == split]["records"].sum() == expected, (kind, split)
    assert density.groupby("kind")["records"].sum().tolist() == [len(corpus_frame)] * 2


def test_cue_words_all_listed_and_counted(records, s8f_answers):
    counts = charts.cue_word_counts(records)
    assert sorted(counts["cue_word"].unique()) == sorted(CUE_WORDS)
    assert len(counts) == len(CUE_WORDS) * 3  # zero counts stay listed
    for word in CUE_WORDS:
        expected = sum(1 for a in s8f_answers["answers"] if word in a["scope_contradictions"])
        assert counts[counts["cue_word"] == word]["records"].sum() == expected, word


def test_timeline_events_count_created_and_closed(corpus_frame):
    events = charts.timeline_events(corpus_frame)
    assert (events["event"] == "created").sum() == len(corpus_frame)
    assert (events["event"] == "closed").sum() == corpus_frame["closed_at"].notna().sum()


def test_timeline_brush_filters_the_label_chart(corpus_frame):
    spec = charts.timeline_with_labels(charts.timeline_events(corpus_frame), corpus_frame).to_dict()
    params = spec.get("params", []) + spec["vconcat"][0].get("params", [])
    assert [p["select"]["type"] for p in params if p["name"] == "brush"] == ["interval"]
    assert {"filter": {"param": "brush"}} in spec["vconcat"][1]["transform"]


def test_component_sizes_cover_every_record(records):
    sizes = charts.component_size_counts(records)
    assert (sizes["size"] * sizes["components"]).sum() == len(records)


def test_rendered_chart_is_a_real_non_blank_image(corpus_frame, tmp_path):
    png, svg = charts.save(charts.state_by_split(corpus_frame), "state", tmp_path)
    assert (tmp_path / "state.png").read_bytes() == png and (tmp_path / "state.svg").read_text() == svg
    assert svg.lstrip().startswith("<svg") and "Records by state and split" in svg
    width, height = charts.png_size(png)
    assert width >= 400 and height >= 300
    census = colour_census(png)
    assert len(census) > 10  # not one flat colour
    assert has_colour(census, BLUE) and has_colour(census, ORANGE)  # CLOSED and OPEN bars drawn


def test_log_scale_label_bars_are_drawn(corpus_frame):
    """A log axis has no zero; bars must still be drawn (they start just below 1)."""
    counts = charts.label_counts(corpus_frame)
    tail = counts[counts["label"].isin(counts["label"].unique()[:8])]  # a few labels: a small image to decode
    png, _ = charts.render(charts.labels_by_split(tail))
    census = colour_census(png, step=2)
    assert all(has_colour(census, c, at_least=100) for c in (BLUE, ORANGE, GREEN))


def test_png_size_refuses_other_bytes():
    with pytest.raises(ValueError):
        charts.png_size(b"GIF89a" + b"\0" * 30)


# ---------------------------------------------------------------- slice charts (issue 9)


@pytest.fixture(scope="module")
def planted_table(s8f_corpus, s8f_answers, records):
    from microctx.contract.score import grade
    from microctx.grading.examples import planted_submission

    facts = slices.facts_frame(grade(s8f_answers, planted_submission(s8f_answers)).facts)
    return slices.slice_table(facts, s8f_corpus, records=slices.record_table(s8f_corpus), n_boot=2000)


def _layers(spec):
    for layer in spec.get("layer", []):
        yield from _layers(layer)
        yield layer


def test_slice_f1_draws_non_estimable_slices_hollow_without_interval(planted_table):
    spec = charts.slice_f1(planted_table).to_dict()
    marks = [(layer["mark"], layer.get("transform", [])) for layer in _layers(spec) if "mark" in layer]
    hollow = [m for m, t in marks if isinstance(m, dict) and m.get("type") == "point" and m.get("filled") is False]
    assert hollow and all(t == [{"filter": "(!datum.estimable)"}] for m, t in marks if m in hollow)
    rules = [t for m, t in marks if (m if isinstance(m, str) else m.get("type")) == "rule" and t]
    assert rules == [[{"filter": "datum.estimable"}]]  # intervals only where estimable
    data = next(iter(spec["datasets"].values()))
    moe = next(r for r in data if r["slice"] == "moe")
    assert moe["estimable"] is False and moe["status"] == "not estimable"
    assert moe["row"] == "label: moe  (n=22, n_eff=1.0)"  # support and effective components in the static image
    scale = spec["layer"][0]["encoding"]["color"]["scale"]
    assert dict(zip(scale["domain"], scale["range"])) == {
        "judged": charts.BLUE,
        "weak": charts.RED,
        "too small": charts.GREY,
        "not estimable": charts.BROWN,
    }
    assert len(set(scale["range"])) == len(scale["range"])  # the legend tells every status apart


def test_never_predicted_labels_stay_in_the_precision_panel(planted_table):
    spec = charts.precision_recall(planted_table).to_dict()
    data = next(iter(spec["datasets"].values()))
    enhancement = [r for r in data if r["slice"] == "enhancement" and r["metric"] == "precision"]
    assert len(enhancement) == 1 and enhancement[0]["note"] == "never predicted" and enhancement[0]["note_x"] == 0
    assert enhancement[0]["value"] is None  # no point drawn: precision is undefined, not 0
    labels = planted_table[planted_table["slice_kind"] == "label"]
    shown = pd.concat([labels[labels["slice"] == "enhancement"], labels.head(5)])  # (not estimable on s8f: not first)
    png, _ = charts.render(charts.precision_recall(shown))
    assert has_colour(colour_census(png, step=1), RED, at_least=5)  # the note is drawn


# the grade report's charts, rendered from the planted table (n_boot=2000): SVG and PNG SHA-256,
# the same bytes as when they were altair charts (issue 24: built as Vega-Lite dicts since)
GRADE_CHART_PINS = {
    "slice_f1": (
        "25ed0798a7d77e550dff5dd81b79ebd4ac0da1c761ac9e57711fa51ddedf40f4",
        "e0504e41f3ac742d08a5d005bdecb7f53b3d7be1b4c5ed857be7dd909d38bedd",
    ),
    "precision_recall": (
        "56ca8f9d3f222eec4ae787192299403608c995703fbcc36a27d8d08243330eaf",
        "1d5c5657efc7b76d5c54a240eb57f991f9e41cbe6d958935478827abefa83d29",
    ),
    "outcomes_by_kind": (
        "f0c83b8b7f71fb8e5d36c527c757bce0f90a4bfd351d51e4c619378569d35c52",
        "00b852e055e6ea18b0cb040e9b15e6acc35419754eb86fd561ad62cb78e193cd",
    ),
}


@pytest.mark.parametrize("name", sorted(GRADE_CHART_PINS))
def test_grade_report_charts_keep_their_bytes(planted_table, name):
    import hashlib

    import altair as alt

    spec = getattr(charts, name)(planted_table)
    assert isinstance(spec, charts.Spec) and spec.spec["$schema"] == alt.SCHEMA_URL  # what altair writes
    png, svg = charts.render(spec)
    assert (hashlib.sha256(svg.encode()).hexdigest(), hashlib.sha256(png).hexdigest()) == GRADE_CHART_PINS[name]


@pytest.fixture
def drawing():
    """A chart renderer process as a report's kernel starts one (`renderer.start`), this process's
    for the test, closed after it."""
    from microctx.reports import renderer

    before = renderer._CURRENT
    started = renderer.start()
    assert started is not None and started is not before
    yield started
    started.close()
    renderer._CURRENT = before


def test_a_renderer_process_draws_the_same_bytes_and_writes_the_pdfs(planted_table, drawing, tmp_path):
    """A report kernel's renderer runs vega and writes each PDF (issue 24); the SVG and PNG are the
    pinned bytes, and the PDF is the column PDF of the SVG."""
    import hashlib

    for n, name in enumerate(sorted(GRADE_CHART_PINS), 1):
        png, svg = charts.save(getattr(charts, name)(planted_table), name, tmp_path)
        assert drawing.rendered == n  # vega ran in the renderer, not here
        assert (hashlib.sha256(svg.encode()).hexdigest(), hashlib.sha256(png).hexdigest()) == GRADE_CHART_PINS[name]
        assert (tmp_path / f"{name}.svg").read_text() == svg and (tmp_path / f"{name}.png").read_bytes() == png
        pdf = (tmp_path / f"{name}.pdf").read_bytes()
        assert pdf.startswith(b"%PDF") and len(pdf) > 5000
    assert drawing.alive()


def test_a_chart_the_renderer_cannot_draw_raises_vl_converts_own_error_here(planted_table, drawing):
    """vega's error for a bad chart is raised by the process that asked (drawn here again), and the
    renderer goes on drawing the next chart."""
    with pytest.raises(ValueError):
        charts.render(charts.Spec({"mark": "no such mark", "data": {"values": []}}))
    assert drawing.alive() and drawing.rendered == 0
    charts.render(charts.outcomes_by_kind(planted_table))
    assert drawing.rendered == 1


def test_charts_are_drawn_here_when_the_renderer_died(planted_table, drawing, tmp_path):
    """A renderer that died is dropped: the chart (and its PDF) is drawn in this process, same bytes."""
    import hashlib

    from microctx.reports import renderer

    drawing._process.kill()
    drawing._process.wait()
    assert drawing.svg({"mark": "point", "data": {"values": []}}) is None  # the conversation fails: dropped
    png, svg = charts.save(charts.outcomes_by_kind(planted_table), "outcomes_by_kind", tmp_path)
    assert (hashlib.sha256(svg.encode()).hexdigest(), hashlib.sha256(png).hexdigest()) == GRADE_CHART_PINS["outcomes_by_kind"]
    assert (tmp_path / "outcomes_by_kind.pdf").read_bytes().startswith(b"%PDF")
    assert drawing.rendered == 0 and renderer.current() is None


def test_inline_data_names_and_cleans_values_as_altair_does():
    import altair as alt

    frame = pd.DataFrame(
        {"s": pd.Series(["a", None], dtype="str"), "i": [1, 2], "f": [float("nan"), float("inf")], "b": [True, False]}
    )
    datasets: dict = {}
    from microctx.reports.figures import inline_data

    ref = inline_data(frame, datasets)
    theirs = alt.Chart(frame).mark_point().encode(x="i:Q").to_dict()
    assert datasets == theirs["datasets"] and ref == theirs["data"]
    assert datasets[ref["name"]] == [{"s": "a", "i": 1, "f": None, "b": True}, {"s": None, "i": 2, "f": None, "b": False}]


def test_component_chart_shows_the_giant_component(records):
    sizes = charts.component_size_counts(records)
    spec = charts.component_sizes_chart(sizes).to_dict()
    assert any("334 records (49% of test)" in line for line in spec["title"]["subtitle"])
    data = next(iter(spec["datasets"].values()))
    giant = next(r for r in data if r["split"] == "test" and r["size"] == 334)
    assert (giant["records"], giant["components"], giant["label"]) == (334, 1, "1×")
    assert spec["layer"][0]["encoding"]["y"]["scale"] == {"type": "log", "domainMin": 0.8}  # a count of 1 is drawn
    png, _ = charts.render(charts.component_sizes_chart(sizes[sizes["split"] == "test"]))
    assert has_colour(colour_census(png, step=2), GREEN, at_least=50)


def test_png_scale_keeps_large_charts_under_the_pixel_cap(corpus_frame):
    """PNGs of sensible size (issue 24): twice the shown size for a chart of ordinary size, less for
    a tall one (never below the shown size); the shown size comes from the SVG."""
    assert charts.png_scale(400, 300) == charts.PNG_SCALE
    assert charts.png_scale(8000, 8000) == 1.0
    png, svg = charts.render(charts.labels_by_split(charts.label_counts(corpus_frame)))  # every label: a tall chart
    (width, height), (shown_w, shown_h) = charts.png_size(png), charts.svg_size(svg)
    assert shown_w * shown_h * charts.PNG_SCALE**2 > charts.PNG_MAX_PIXELS  # at twice its size it would pass the cap
    assert width * height <= charts.PNG_MAX_PIXELS * 1.01 and width >= shown_w and height >= shown_h
    figure = charts.Figure(png, svg, "labels")
    data, metadata = figure._repr_mimebundle_()
    assert (figure.width, figure.height) == (round(shown_w), round(shown_h))
    assert metadata["image/png"] == {"width": figure.width, "height": figure.height} and metadata["chart"] == "labels"
    assert data["image/svg+xml"] == svg and len(svg.encode()) < len(png)  # the smaller one goes into the HTML


def _queued(fd: int) -> int:
    """The bytes waiting in the pipe `fd` writes to (FIONREAD)."""
    import fcntl
    import termios

    return int(struct.unpack("i", fcntl.ioctl(fd, termios.FIONREAD, b"\0\0\0\0"))[0])


def test_a_pdf_request_interrupted_as_it_is_sent_leaves_no_answer_for_the_next_chart(drawing, tmp_path):
    """An interrupt (KeyboardInterrupt) that lands as the PDF request is written, after its bytes
    went out, drops the renderer: it used to live on with the request unanswered, and the next
    chart read that answer, the chart after it the SVG of the chart before (a chart drawn as
    another). The renderer is stopped so the request blocks; the interrupt is raised when the write
    returns (`_thread.interrupt_main`: as a signal that lands between system calls)."""
    import _thread
    import os
    import signal
    import threading
    import time

    point = {"mark": "point", "data": {"values": [{"x": 1}]}, "encoding": {"x": {"field": "x", "type": "quantitative"}}}
    assert drawing.svg(point) is not None
    pid, pipe = drawing._process.pid, drawing._process.stdin.fileno()

    def interrupt_then_resume() -> None:
        end = time.monotonic() + 30
        while _queued(pipe) < 4096 and time.monotonic() < end:  # the request is being written
            time.sleep(0.01)
        time.sleep(0.05)
        _thread.interrupt_main()
        time.sleep(0.2)
        os.kill(pid, signal.SIGCONT)

    os.kill(pid, signal.SIGSTOP)
    resume = threading.Thread(target=interrupt_then_resume)
    resume.start()
    with pytest.raises(KeyboardInterrupt):
        with drawing.pdf("<svg " + "x" * 1_000_000 + ">", str(tmp_path / "never.pdf")):
            time.sleep(1)  # the interrupt lands in the write, not here
    resume.join()
    for title in ("first", "second", "third"):
        svg = charts.render(charts.Spec({**point, "title": title}))[1]
        assert f">{title}</text>" in svg
    assert not drawing.alive()


def test_a_pdf_request_that_cannot_be_sent_is_left_to_the_caller(drawing, tmp_path):
    """A renderer whose request pipe is closed is dropped and the PDF left to the caller (the send
    raised ValueError out of `pdf`)."""
    svg = charts.render(charts.Spec({"mark": "point", "data": {"values": [{"x": 1}]}}))[1]
    drawing._process.stdin.close()
    with drawing.pdf(svg, str(tmp_path / "chart.pdf")) as written:
        pass
    assert written == [False] and not drawing.alive()
