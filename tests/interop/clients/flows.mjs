// What every interoperability client script shares: loading a package from the pinned install folder, the
// scripted elicitation answers, the demo flows, and the one JSON report on stdout.
//
// The scripts live in the repository, the packages in the install folder (.cache/conformance/node_modules), so a
// bare `import '@modelcontextprotocol/...'` would not find them: `load` resolves the package's own "exports" map
// (the "import" condition) inside that folder and imports the file it names.
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { pathToFileURL } from 'node:url';

/**
 * The command line every script takes: <server> <mode> <node_modules folder>. The server is the MCP endpoint's URL,
 * or, for a stdio mode, a JSON array: the command that starts the server and its arguments (`server.stdio` then
 * holds {command, args} for the SDK's StdioClientTransport; the server's stderr passes through to ours).
 */
export function parseArguments(modes) {
    const [server, mode, modules] = process.argv.slice(2);
    if (!server || !mode || !modules || !modes.includes(mode)) {
        throw new Error(`usage: node SCRIPT SERVER MODE NODE_MODULES (MODE one of ${modes.join(', ')})`);
    }
    if (!mode.startsWith('stdio')) return { url: server, mode, modules };
    const [command, ...args] = JSON.parse(server);
    return { stdio: { command, args, cwd: process.cwd(), stderr: 'inherit' }, mode, modules };
}

function exportTarget(entry) {
    if (typeof entry === 'string') return entry;
    if (entry && typeof entry === 'object') return exportTarget(entry.import ?? entry.default);
    return undefined;
}

/** The version the install folder holds of package `name`. */
export function packageVersion(modules, name) {
    return JSON.parse(readFileSync(join(modules, ...name.split('/'), 'package.json'), 'utf8')).version;
}

/** Import `subpath` ('.' or './x/y.js') of package `name` from the `modules` folder, as Node's "import" would. */
export async function load(modules, name, subpath = '.') {
    const home = join(modules, ...name.split('/'));
    const manifest = JSON.parse(readFileSync(join(home, 'package.json'), 'utf8'));
    const exports = manifest.exports ?? {};
    let target = exportTarget(exports[subpath]);
    if (target === undefined) {
        for (const [key, entry] of Object.entries(exports)) {
            const star = key.indexOf('*');
            if (star < 0) continue;
            const [head, tail] = [key.slice(0, star), key.slice(star + 1)];
            if (subpath.startsWith(head) && subpath.endsWith(tail) && subpath.length >= key.length - 1) {
                const middle = subpath.slice(head.length, subpath.length - tail.length);
                target = exportTarget(entry)?.replace('*', middle);
                break;
            }
        }
    }
    if (target === undefined) throw new Error(`${name} exports no ${subpath}`);
    return import(pathToFileURL(join(home, target)).href);
}

/**
 * The elicitation answers, given out in order: each flow queues the answers it expects to need, and the handler
 * takes the next one. A request with no queued answer is an error (the server asked more than the flow expects),
 * and so is an answer left over when the flow ends (it asked less).
 */
export class ScriptedAnswers {
    constructor() {
        this.queue = [];
        this.asked = [];
    }

    expect(...answers) {
        this.queue.push(...answers);
        this.asked = [];
    }

    /** The elicitation/create handler body: record what was asked, return the next scripted answer (for VISIT:
     * complete the URL's page first, as the user would in a browser, then accept). */
    async answer(params) {
        this.asked.push({ mode: params?.mode ?? 'form', message: params?.message ?? null });
        const next = this.queue.shift();
        if (next === undefined) throw new Error(`unexpected elicitation: ${JSON.stringify(params?.message)}`);
        if (next !== VISIT) return next;
        if (params?.mode !== 'url' || typeof params.url !== 'string') throw new Error('VISIT needs a URL elicitation');
        await completePage(params.url);
        return { action: 'accept' };
    }

    finish(flow) {
        if (this.queue.length > 0) throw new Error(`${flow}: ${this.queue.length} scripted answer(s) never asked for`);
        return this.asked;
    }
}

export const ACCEPT = { action: 'accept', content: {} };
export const DECLINE = { action: 'decline' };
export const CANCEL = { action: 'cancel' };
export const APPROVE = { action: 'accept', content: { approve: true } };
export const QUANTITY = { action: 'accept', content: { quantity: 3 } };
export const CONFIRM = { action: 'accept', content: { confirm: true } };
/** Not an answer on the wire: open the URL elicitation's page and press its button, then answer accept. */
export const VISIT = Object.freeze({ visit: true });

/**
 * What a user does on the demo's link page: GET it (the form token comes in a hidden field and in a cookie), then
 * POST the form with both, from the page's own origin. Throws unless both steps succeed.
 */
async function completePage(url) {
    const page = await fetch(url, { redirect: 'manual' });
    const html = await page.text();
    const token = /name="csrf" value="([^"]*)"/.exec(html)?.[1];
    const cookie = page.headers.get('set-cookie')?.split(';')[0];
    if (page.status !== 200 || token === undefined || cookie === undefined) {
        throw new Error(`the link page answered ${page.status} without a form token and its cookie`);
    }
    const posted = await fetch(url, {
        method: 'POST',
        redirect: 'manual',
        headers: {
            'content-type': 'application/x-www-form-urlencoded',
            cookie,
            origin: new URL(url).origin
        },
        body: new URLSearchParams({ csrf: token }).toString()
    });
    if (posted.status >= 400) throw new Error(`the link page refused the approval (${posted.status})`);
}

/** The flows: catalog.continue answered accept, decline and cancel, deploy.approve with two stages,
 * account.link's URL elicitation completed on the server's own page, and order.checkout's two rounds (its state kept
 * server-side behind a rotating handle). */
export const FLOWS = [
    { name: 'catalog.continue', label: 'accept', arguments: {}, answers: [ACCEPT] },
    { name: 'catalog.continue', label: 'decline', arguments: {}, answers: [DECLINE] },
    { name: 'catalog.continue', label: 'cancel', arguments: {}, answers: [CANCEL] },
    { name: 'deploy.approve', label: 'stages=2', arguments: { stages: 2 }, answers: [APPROVE, APPROVE] },
    { name: 'account.link', label: 'url', arguments: {}, answers: [VISIT] },
    { name: 'order.checkout', label: 'handles', arguments: {}, answers: [QUANTITY, CONFIRM] }
];

/** The flows for a server reached over stdio (`stdio` true) or HTTP: account.link's page is served by the HTTP
 * listener, which `soklet serve --stdio` does not open. */
export function flowsFor(stdio) {
    return stdio ? FLOWS.filter(flow => flow.name !== 'account.link') : FLOWS;
}

/** Run `flows` with `callTool(name, arguments)`; the report's `calls`. */
export async function runFlows(answers, callTool, flows) {
    const calls = [];
    for (const flow of flows) {
        answers.expect(...flow.answers);
        const result = await callTool(flow.name, flow.arguments);
        const texts = (result.content ?? []).filter(item => item.type === 'text').map(item => item.text);
        calls.push({
            tool: flow.name,
            flow: flow.label,
            isError: result.isError === true,
            texts,
            elicitations: answers.finish(`${flow.name} ${flow.label}`)
        });
    }
    return calls;
}

/** Run `main`, print its report as one JSON line, and exit 0; on any error print it on stderr and exit 1. */
export async function report(main) {
    try {
        const value = await main();
        process.stdout.write(JSON.stringify(value) + '\n');
        process.exit(0);
    } catch (error) {
        process.stderr.write(`${error?.stack ?? error}\n`);
        process.exit(1);
    }
}
