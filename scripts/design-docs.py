#!/usr/bin/env python3
"""Regenerate docs/design/ from the shared seeds and design notes.

The seed pages (../shared/seeds/*.txt, the specification) and the design
notes the code cites (REFERENCE.md, CODEX.md, OPENCLAW.md, ARCHITECTURE.md) are copied
verbatim; only headings become markdown headings with stable anchors, so
`docs/design/<file>#<anchor>` links resolve for someone who has only the
repository:

  seed-00N.md#step-K     the Kth step of a seed's "Execution Trace"
  seed-00N.md#<slug>     a seed's section ("overview", "what-each-side-stores")
  reference.md#sN-M      REFERENCE §N.M (reference.md#sN for §N)
  codex.md#sN, openclaw.md#sN-M   the same for CODEX.md and OPENCLAW.md
  architecture.md#<slug> an ARCHITECTURE.md section ("import-rules", "flows")

Usage: python3 scripts/design-docs.py [SHARED_DIR]   (default ../shared)
"""
import os, re, sys

root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
shared = sys.argv[1] if len(sys.argv) > 1 else os.path.join(root, '..', 'shared')
out = os.path.join(root, 'docs', 'design')

SEEDS = [('000', '000_d4b45095d4b4810a.txt'), ('001', '001_551129368856a23c.txt'),
         ('002', '002_b0565a3b1f17f178.txt'), ('003', '003_3083fcefc2a61917.txt')]
NAV = {'OpenClaw EnterpriseDOCSGitHub', 'Search documentation'}
DIAGRAM = re.compile(r'^(graph |sequenceDiagram|flowchart |---$)')


def slug(s):
    return re.sub(r'[^a-z0-9]+', '-', s.lower()).strip('-')


def heading_lines(lines):
    """Short standalone lines (blank around them, no sentence punctuation)."""
    out = set()
    for i, l in enumerate(lines):
        prev = lines[i - 1] if i else ''
        nxt = lines[i + 1] if i + 1 < len(lines) else ''
        if (l and len(l) < 70 and not prev.strip() and not nxt.strip()
                and not re.match(r'^[\s|`\-*>#]|^\d+\.|.*[.:,;)]$|^\w+/\S+\.ts:', l)):
            out.add(i)
    return out


def seed(num, name):
    lines = open(os.path.join(shared, 'seeds', name)).read().split('\n')
    heads = heading_lines(lines)
    md, title, fence = [], None, False
    for i, l in enumerate(lines):
        if l.strip() in NAV:
            continue
        if fence:
            md.append(l)
            if not l.strip():
                md.insert(len(md) - 1, '```')
                fence = False
            continue
        if DIAGRAM.match(l):
            md += ['```mermaid', l]
            fence = True
            continue
        if i in heads and title is None:
            title = l
            md += [f'# Seed {num} — {l}', '',
                   f'*The specification page `shared/seeds/{name}`, verbatim; headings and anchors added.*']
            continue
        if i in heads:
            md += [f'<a id="{slug(l)}"></a>', f'## {l}']
            continue
        m = re.match(r'^(\d+)\. (.*)$', l)
        if m and num == '000':
            md += [f'<a id="step-{m.group(1)}"></a>', f'### {m.group(1)}. {m.group(2)}']
            continue
        md.append(l)
    if fence:
        md.append('```')
    if title is None:
        md = [f'# Seed {num}', '', f'*The specification page `shared/seeds/{name}`, verbatim.*', ''] + md
    return '\n'.join(md).rstrip() + '\n'


def design(name, label, sections=False):
    """A design note; numbered headings get #sN-M anchors, and with sections
    every ## heading gets the slug of its words before any parenthesis
    ("## Import rules (the house's walls)" is #import-rules)."""
    lines = open(os.path.join(shared, 'design', name)).read().split('\n')
    md = []
    for l in lines:
        m = re.match(r'^(#{2,3}) (\d+)(?:\.(\d+))?\.? ', l)
        if m:
            anchor = 's' + m.group(2) + (('-' + m.group(3)) if m.group(3) else '')
            md.append(f'<a id="{anchor}"></a>')
        elif sections and l.startswith('## '):
            md.append(f'<a id="{slug(l[3:].split(" (")[0])}"></a>')
        md.append(l)
    how = 'a section is `#<its-words>`' if sections else '§N.M is `#sN-M`'
    head = f'*`shared/design/{name}` ({label}), verbatim; `<a id>` anchors added: {how}.*\n\n'
    return head + '\n'.join(md).rstrip() + '\n'


def main():
    os.makedirs(out, exist_ok=True)
    for num, name in SEEDS:
        open(os.path.join(out, f'seed-{num}.md'), 'w').write(seed(num, name))
    for name, label, dst in [('REFERENCE.md', 'what the TypeScript reference does', 'reference.md'),
                             ('CODEX.md', 'measured facts about Codex', 'codex.md'),
                             ('OPENCLAW.md', 'measured facts about OpenClaw', 'openclaw.md')]:
        open(os.path.join(out, dst), 'w').write(design(name, label))
    open(os.path.join(out, 'architecture.md'), 'w').write(
        design('ARCHITECTURE.md', 'processes, layout, import walls', sections=True))


main()
