"""Checks an nnsc-plan --report page (report.test): its tags balance, every
picture parses as XML (an SVG a browser can draw), and it fetches nothing
(no scripts, links, images or remote URLs). Prints one line per check."""
import sys
import xml.etree.ElementTree as ET
from html.parser import HTMLParser

VOID = {"meta", "br", "hr", "img", "input", "link", "rect", "line"}


class Balance(HTMLParser):
    def __init__(self):
        super().__init__()
        self.stack, self.errors, self.counts = [], [], {}

    def handle_starttag(self, tag, attrs):
        self.counts[tag] = self.counts.get(tag, 0) + 1
        for name, value in attrs:
            if name in ("src", "href") or (value or "").startswith(("http:", "https:", "//")) \
                    and name != "xmlns":
                self.errors.append(f"fetches {name}={value}")
        if tag in ("script", "link", "img", "iframe"):
            self.errors.append(f"has <{tag}>")
        if tag not in VOID:
            self.stack.append(tag)

    def handle_startendtag(self, tag, attrs):
        self.counts[tag] = self.counts.get(tag, 0) + 1

    def handle_endtag(self, tag):
        if tag in VOID:
            return
        if not self.stack or self.stack[-1] != tag:
            self.errors.append(f"</{tag}> closes <{self.stack[-1] if self.stack else 'nothing'}>")
        else:
            self.stack.pop()


text = open(sys.argv[1], encoding="utf-8").read()
p = Balance()
p.feed(text)
p.close()
if p.stack:
    p.errors.append("unclosed: " + " ".join(p.stack))
svgs = 0
start = 0
while (i := text.find("<svg", start)) >= 0:
    j = text.index("</svg>", i) + len("</svg>")
    try:
        ET.fromstring(text[i:j])
        svgs += 1
    except ET.ParseError as e:
        p.errors.append(f"picture {svgs + 1} is not XML: {e}")
    start = j
print("balanced and self-contained:", "ok" if not p.errors else "; ".join(p.errors[:5]))
print(f"pictures: {svgs}, tables: {p.counts.get('table', 0)}, bars: {p.counts.get('rect', 0)}")
sys.exit(1 if p.errors else 0)
