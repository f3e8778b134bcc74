/**
 * The interactive reference at /api/v1/docs: HTML rendered on the server from the OpenAPI document
 * (no script, no CDN; the stylesheet is served next to it), so it works under a strict CSP.
 */

type Json = Record<string, any>;

const escapeHtml = (text: string) =>
  text.replace(/[&<>"']/g, (c) => ({ '&': '&amp;', '<': '&lt;', '>': '&gt;', '"': '&quot;', "'": '&#39;' })[c]!);

/** The little Markdown the descriptions use: paragraphs, `- ` lists, `code` and **bold**. */
function markdown(text: string | undefined): string {
  if (!text) return '';
  const inline = (line: string) =>
    escapeHtml(line)
      .replace(/`([^`]+)`/g, '<code>$1</code>')
      .replace(/\*\*([^*]+)\*\*/g, '<strong>$1</strong>');
  return text
    .split(/\n{2,}/)
    .map((block) => {
      const lines = block.split('\n');
      const items = lines.filter((l) => l.startsWith('- '));
      const lead = lines.filter((l) => !l.startsWith('- ')).join(' ');
      return (
        (lead ? `<p>${inline(lead)}</p>` : '') +
        (items.length ? `<ul>${items.map((l) => `<li>${inline(l.slice(2))}</li>`).join('')}</ul>` : '')
      );
    })
    .join('\n');
}

const refName = (ref: string) => ref.split('/').pop()!;
const schemaLink = (name: string) => `<a href="#schema-${escapeHtml(name)}">${escapeHtml(name)}</a>`;

/** A short rendering of a schema's type: links for references, values for enums. */
function typeOf(schema: Json | undefined): string {
  if (!schema) return '';
  if (schema.$ref) return schemaLink(refName(schema.$ref));
  if (schema.const !== undefined) return `<code>${escapeHtml(JSON.stringify(schema.const))}</code>`;
  if (schema.enum) return schema.enum.map((v: unknown) => `<code>${escapeHtml(String(v))}</code>`).join(' | ');
  const variants = schema.oneOf ?? schema.anyOf;
  if (variants) return variants.map(typeOf).join(' | ');
  if (schema.type === 'array') return `array of ${typeOf(schema.items)}`;
  const type = Array.isArray(schema.type) ? schema.type.join(' or ') : (schema.type ?? 'any');
  return escapeHtml(schema.format ? `${type} (${schema.format})` : type);
}

function propertiesTable(schema: Json): string {
  const properties = Object.entries((schema.properties ?? {}) as Record<string, Json>);
  if (!properties.length) return `<p>${typeOf(schema)}</p>`;
  const required = new Set<string>(schema.required ?? []);
  const rows = properties
    .map(
      ([name, p]) =>
        `<tr><td><code>${escapeHtml(name)}</code>${required.has(name) ? ' <span class="req">required</span>' : ''}</td><td>${typeOf(p)}</td><td>${markdown(p.description)}</td></tr>`,
    )
    .join('');
  return `<table><thead><tr><th>field</th><th>type</th><th>meaning</th></tr></thead><tbody>${rows}</tbody></table>`;
}

function operationHtml(path: string, method: string, op: Json): string {
  const params = (op.parameters ?? []) as Json[];
  const paramTable = params.length
    ? `<h4>Parameters</h4><table><thead><tr><th>name</th><th>in</th><th>type</th><th>meaning</th></tr></thead><tbody>${params
        .map(
          (p) =>
            `<tr><td><code>${escapeHtml(p.name)}</code>${p.required ? ' <span class="req">required</span>' : ''}</td><td>${p.in}</td><td>${typeOf(p.schema)}</td><td>${markdown(p.description)}</td></tr>`,
        )
        .join('')}</tbody></table>`
    : '';
  const body = op.requestBody
    ? `<h4>Body</h4><ul>${Object.entries(op.requestBody.content as Record<string, Json>)
        .map(([type, c]) => `<li><code>${escapeHtml(type)}</code>: ${typeOf(c.schema)}</li>`)
        .join('')}</ul>`
    : '';
  const responses = `<h4>Responses</h4><table><tbody>${Object.entries(op.responses as Record<string, Json>)
    .map(([status, r]) => {
      const content = Object.values((r.content ?? {}) as Record<string, Json>)[0];
      return `<tr><td>${status}</td><td>${content ? typeOf(content.schema) : ''}</td><td>${markdown(r.description)}</td></tr>`;
    })
    .join('')}</tbody></table>`;
  return `<section id="${escapeHtml(op.operationId)}"><h3><span class="method ${method}">${method.toUpperCase()}</span> <code>${escapeHtml(path)}</code></h3><p class="summary">${escapeHtml(op.summary ?? '')}${op.security?.length === 0 ? ' <span class="req">no key</span>' : ''}</p>${markdown(op.description)}${paramTable}${body}${responses}</section>`;
}

export function docsPage(doc: Json, stylesheet: string): string {
  const operations: { tag: string; html: string; id: string; label: string }[] = [];
  for (const [path, item] of Object.entries(doc.paths as Record<string, Json>))
    for (const [method, op] of Object.entries(item))
      operations.push({
        tag: op.tags?.[0] ?? '',
        html: operationHtml(path, method, op),
        id: op.operationId,
        label: `${method.toUpperCase()} ${path}`,
      });
  const tags = (doc.tags as { name: string }[]).map((t) => t.name);
  const nav = tags
    .map(
      (tag) =>
        `<h4>${escapeHtml(tag)}</h4><ul>${operations
          .filter((o) => o.tag === tag)
          .map((o) => `<li><a href="#${escapeHtml(o.id)}">${escapeHtml(o.label)}</a></li>`)
          .join('')}</ul>`,
    )
    .join('');
  const sections = tags
    .map(
      (tag) =>
        `<h2>${escapeHtml(tag)}</h2>${operations
          .filter((o) => o.tag === tag)
          .map((o) => o.html)
          .join('')}`,
    )
    .join('');
  const webhooks = Object.entries(doc.webhooks as Record<string, Json>)
    .map(
      ([type, item]) =>
        `<section id="event-${escapeHtml(type)}"><h3><code>${escapeHtml(type)}</code></h3>${markdown(item.post.description)}<p>Payload: ${typeOf(item.post.requestBody.content['application/json'].schema)}</p></section>`,
    )
    .join('');
  const schemas = Object.entries(doc.components.schemas as Record<string, Json>)
    .map(
      ([name, schema]) =>
        `<section id="schema-${escapeHtml(name)}"><h3>${escapeHtml(name)}</h3>${markdown(schema.description)}${propertiesTable(schema)}</section>`,
    )
    .join('');
  return `<!doctype html>
<html lang="en"><head><meta charset="utf-8"><meta name="viewport" content="width=device-width, initial-scale=1">
<title>${escapeHtml(doc.info.title)}: API reference</title><link rel="stylesheet" href="${escapeHtml(stylesheet)}"></head>
<body><nav><p><a href="openapi.json">openapi.json</a></p>${nav}<h4>Webhooks</h4><ul><li><a href="#webhooks">event types</a></li></ul></nav>
<main><h1>${escapeHtml(doc.info.title)} <small>${escapeHtml(doc.info.version)}</small></h1>${markdown(doc.info.description)}
${sections}<h2 id="webhooks">Webhooks</h2>${webhooks}<h2>Schemas</h2>${schemas}</main></body></html>`;
}

export const DOCS_CSS = `body{margin:0;font:15px/1.5 system-ui,sans-serif;color:#1d1d1f;display:flex}
nav{position:sticky;top:0;height:100vh;overflow:auto;width:19rem;flex:none;padding:1rem;background:#f5f5f7;font-size:13px}
nav ul{list-style:none;padding:0;margin:0 0 .5rem}nav h4{margin:.8rem 0 .2rem}
main{padding:1rem 2rem;max-width:60rem}section{border-top:1px solid #ddd;padding:.5rem 0}
table{border-collapse:collapse;width:100%;margin:.3rem 0}td,th{border:1px solid #e3e3e3;padding:.25rem .4rem;vertical-align:top;text-align:left}
td p{margin:0}code{background:#f0f0f3;padding:0 .2rem;border-radius:3px}
.method{display:inline-block;min-width:4rem;text-align:center;color:#fff;border-radius:3px;font-size:12px;padding:.1rem .3rem}
.get{background:#2e7d32}.post{background:#1565c0}.put{background:#6a1b9a}.patch{background:#ef6c00}.delete{background:#c62828}
.req{color:#c62828;font-size:11px}.summary{font-weight:600}`;
