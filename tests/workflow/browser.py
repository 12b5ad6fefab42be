"""Render a Snakemake report in headless Chromium and report what it shows (for the report test).

The report is one React page whose results (figures, the fit page) are data URIs in a global
`results`; the app object is the global `app`. A copy of the page gets two scripts: one at the
top collecting JavaScript errors, one at the end that opens every result the way a click does
(`app.setView`), waits for each figure to decode (or the fit page to load), and writes what it
saw into the DOM, which `chromium --dump-dom` prints.
"""

from __future__ import annotations

import json
import re
import shutil
import subprocess
from pathlib import Path

ERRORS = """<script>window.__prismErrors = [];
window.addEventListener('error', e => window.__prismErrors.push(String(e.message)));
window.addEventListener('unhandledrejection', e => window.__prismErrors.push(String(e.reason)));</script>"""

CHECK = """<script>
window.addEventListener('load', () => setTimeout(async () => {
  const seen = [];
  const sleep = ms => new Promise(r => setTimeout(r, ms));
  for (const [path, entry] of Object.entries(results)) {
    const uri = entry.data_uri || '';
    const item = {path: path, mime: uri.slice(5, uri.indexOf(';'))};
    if (item.mime.startsWith('image/')) {
      app.setView({content: 'img', contentPath: uri, resultPath: path});
      await sleep(300);
      const img = [...document.querySelectorAll('img')].find(i => i.getAttribute('src') === uri);
      if (img && !img.complete) await new Promise(r => { img.onload = r; img.onerror = r; });
      item.shown = !!img; item.width = img ? img.naturalWidth : 0; item.height = img ? img.naturalHeight : 0;
    } else if (item.mime === 'text/html') {
      app.setView({content: 'html', contentPath: uri, resultPath: path});
      await sleep(300);
      item.shown = !![...document.querySelectorAll('iframe')].find(f => f.getAttribute('src') === uri);
      const text = await (await fetch(uri)).text();
      item.tables = (text.match(/<table/g) || []).length;
    }
    seen.push(item);
  }
  const out = document.createElement('pre');
  out.id = 'prism-check';
  out.textContent = JSON.stringify({results: seen, errors: window.__prismErrors});
  document.body.appendChild(out);
}, 500));
</script>"""


def chromium() -> str | None:
    return shutil.which("chromium") or shutil.which("chromium-browser")


def render(report: Path, workdir: Path) -> tuple[dict, Path]:
    """{results: [{path, mime, shown, width, height | tables}], errors: [...]}, and a screenshot's path."""
    page = workdir / "report-check.html"
    html = report.read_text(errors="replace")
    html = html.replace("<head>", "<head>" + ERRORS, 1)
    html = html[: html.rindex("</body>")] + CHECK + html[html.rindex("</body>") :]
    page.write_text(html)
    base = [
        chromium(),
        "--headless",
        "--no-sandbox",
        "--disable-gpu",
        "--disable-dev-shm-usage",
        "--virtual-time-budget=20000",
        "--window-size=1280,900",
    ]
    dom = subprocess.run([*base, "--dump-dom", page.as_uri()], capture_output=True, text=True, timeout=180).stdout
    match = re.search(r'<pre id="prism-check">(.*?)</pre>', dom, flags=re.S)
    if not match:
        raise AssertionError(f"the page did not finish its check; DOM tail:\n{dom[-2000:]}")
    seen = json.loads(
        match.group(1).replace("&quot;", '"').replace("&lt;", "<").replace("&gt;", ">").replace("&amp;", "&")
    )
    shot = workdir / "report.png"
    subprocess.run([*base, f"--screenshot={shot}", report.as_uri()], capture_output=True, timeout=180)
    return seen, shot
