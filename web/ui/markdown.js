// meshlab dashboard: a tiny markdown renderer for lab instructions. It builds DOM nodes
// (headings, paragraphs, lists, fenced code blocks, code spans, emphasis and links) and
// puts every piece of the source in text nodes: no markup in the text ever becomes HTML.
"use strict";

const MD_FENCE = /^\s*(`{3,}|~{3,})\s*([\w+-]*)\s*$/;
const MD_HEADING = /^(#{1,6})\s+(.*?)\s*#*\s*$/;
const MD_ITEM = /^\s*(?:[-*+]|\d{1,9}[.)])\s+/;
const MD_INLINE = /`([^`]+)`|\[([^\]]+)\]\(([^()\s]+)\)|\*\*([^*]+)\*\*|\*([^*\s][^*]*)\*/g;

// mdSafeHref keeps web links, relative paths and fragments; anything else (javascript:,
// data:, ...) is refused so the link text shows as plain text.
function mdSafeHref(u) {
  return /^(?:https?:\/\/|\/(?!\/)|#|\.{1,2}\/)/i.test(u) ? u : "";
}

// mdInline splits one line into text, code spans, bold, italic and links.
function mdInline(text) {
  const out = [];
  let last = 0;
  for (const m of text.matchAll(MD_INLINE)) {
    if (m.index > last) out.push(text.slice(last, m.index));
    last = m.index + m[0].length;
    if (m[1] !== undefined) out.push(h("code", {}, m[1]));
    else if (m[2] !== undefined) {
      const href = mdSafeHref(m[3]);
      out.push(href ? h("a", { href, target: "_blank", rel: "noopener noreferrer" }, m[2]) : m[0]);
    } else if (m[4] !== undefined) out.push(h("strong", {}, m[4]));
    else out.push(h("em", {}, m[5]));
  }
  if (last < text.length) out.push(text.slice(last));
  return out;
}

// renderMarkdown returns a fragment for the markdown text. Headings start at h3 (the
// panel's own title is h2).
function renderMarkdown(text) {
  const out = document.createDocumentFragment();
  const lines = String(text ?? "").replace(/\r\n?/g, "\n").split("\n");
  const isBlockStart = (l) => MD_FENCE.test(l) || MD_HEADING.test(l) || MD_ITEM.test(l);
  let i = 0;
  while (i < lines.length) {
    const line = lines[i];
    if (!line.trim()) { i++; continue; }
    const fence = line.match(MD_FENCE);
    if (fence) {
      const body = [];
      for (i++; i < lines.length && !lines[i].trim().startsWith(fence[1]); i++) body.push(lines[i]);
      i++; // the closing fence (or the end)
      out.append(h("pre", { class: "md-code" }, h("code", fence[2] ? { "data-lang": fence[2] } : {}, body.join("\n"))));
      continue;
    }
    const head = line.match(MD_HEADING);
    if (head) {
      out.append(h("h" + Math.min(6, head[1].length + 2), {}, mdInline(head[2])));
      i++;
      continue;
    }
    if (MD_ITEM.test(line)) {
      const ordered = /^\s*\d/.test(line);
      const list = h(ordered ? "ol" : "ul", {});
      while (i < lines.length && MD_ITEM.test(lines[i]) && /^\s*\d/.test(lines[i]) === ordered) {
        let item = lines[i].replace(MD_ITEM, "");
        for (i++; i < lines.length && /^\s+\S/.test(lines[i]) && !isBlockStart(lines[i]); i++) item += " " + lines[i].trim();
        list.append(h("li", {}, mdInline(item)));
      }
      out.append(list);
      continue;
    }
    const para = [];
    while (i < lines.length && lines[i].trim() && !isBlockStart(lines[i])) para.push(lines[i++].trim());
    out.append(h("p", {}, mdInline(para.join(" "))));
  }
  return out;
}
