/**
 * The poll of the folder list and of the folders without an IDLE connection, every
 * `pollIntervalMs` on the command connection: one LIST-STATUS (UIDNEXT, MESSAGES, HIGHESTMODSEQ)
 * for the whole account, then a pass over each folder whose numbers moved since its last pass
 * (CONDSTORE: HIGHESTMODSEQ also moves with every flag change and expunge). Without CONDSTORE a flag
 * change moves nothing in STATUS, so every folder without IDLE gets a pass, which re-reads its flags
 * (gateway/folder-changes.ts). Cost per account and interval: one LIST-STATUS, plus per changed
 * folder one EXAMINE, FETCH and CLOSE; without CONDSTORE plus one FETCH of every message's flags.
 */
import type { FolderCursor, FolderInfo } from '../common/relay.ts';
import { isSelectable, type ServerFeatures } from './imap.ts';
import type { Logger } from './log.ts';
import { countPoll } from './metrics.ts';
import type { Pacer } from './pacer.ts';

/** The folder list last read, and which folders' numbers moved since (whoever read it). */
export class FolderListing {
  folders = new Map<string, FolderInfo>();
  /** Folders gone in the last update. */
  removed: string[] = [];
  /** Folders new in the last update. */
  added: string[] = [];
  /** Folders whose UIDNEXT, MESSAGES or HIGHESTMODSEQ moved since the poll last looked. */
  #moved = new Set<string>();
  /** Folders whose numbers show an expunge since the poll last looked (fewer messages than arrived). */
  #expunged = new Set<string>();
  /** The last listing sent lacked a folder the one before had: the next listing is sent to confirm it. */
  #removalUnconfirmed = false;

  replace(folders: FolderInfo[]): void {
    this.folders = new Map(folders.map((f) => [f.path, f]));
  }

  /**
   * A session's first listing. It may lack folders the Worker still holds (deleted while no session
   * ran, or just before this one began), so the next listing is sent too, to confirm their removal.
   */
  start(folders: FolderInfo[]): void {
    this.replace(folders);
    this.#removalUnconfirmed = true;
  }

  /** Takes a new listing; true when it must be reported to the Worker. */
  update(folders: FolderInfo[]): boolean {
    const previous = this.folders;
    const unchanged =
      folders.length === previous.size &&
      folders.every((f) => previous.has(f.path) && listingKey(f) === listingKey(previous.get(f.path)!));
    for (const f of folders) {
      const last = previous.get(f.path);
      if (!last || last.uidnext !== f.uidnext || last.highest_modseq !== f.highest_modseq || last.total !== f.total)
        this.#moved.add(f.path);
      // MESSAGES grows by at most what UIDNEXT says arrived: if it grew less, something left.
      if (last && last.uidvalidity === f.uidvalidity && f.total < last.total + Math.max(0, f.uidnext - last.uidnext))
        this.#expunged.add(f.path);
    }
    this.removed = [...previous.keys()].filter((path) => !folders.some((f) => f.path === path));
    this.added = folders.filter((f) => !previous.has(f.path)).map((f) => f.path);
    // The Worker deletes a folder only when a second listing confirms it is gone: after a listing
    // that lost a folder, the next one is sent even when nothing changed.
    const report = !unchanged || this.#removalUnconfirmed;
    this.#removalUnconfirmed = !unchanged && this.removed.length > 0;
    this.replace(folders);
    return report;
  }

  /** The last listing sent lost a folder: the Worker waits for the next one to delete it. */
  get removalUnconfirmed(): boolean {
    return this.#removalUnconfirmed;
  }

  /** Whether the folder's numbers moved since the last call for it. */
  takeMoved(path: string): boolean {
    return this.#moved.delete(path);
  }

  /** Whether the folder's numbers showed an expunge since the last call for it. */
  takeExpunged(path: string): boolean {
    return this.#expunged.delete(path);
  }
}

export interface PollDeps {
  refresh(): Promise<FolderInfo[]>;
  listing: FolderListing;
  cursors: Map<string, FolderCursor>;
  features(): ServerFeatures;
  /** The folder's last pass left work for the poll (refused by the server, or new mail held back). */
  pending(path: string): boolean;
  /** Syncs the folder; resolves when its pass is over. */
  wake(path: string): Promise<void>;
  fail(err: unknown): void;
  log: Logger;
  /** The gateway's pacing of background work (gateway/pacer.ts). */
  pacer: Pacer;
}

/**
 * How soon after a listing that lost a folder the confirming one is taken: a deleted folder is
 * reported within one interval and this, not two intervals.
 */
const CONFIRM_REMOVAL_MS = 2_000;

export class Poller {
  #intervalMs: number;
  #deps: PollDeps;
  #timer: NodeJS.Timeout | undefined;
  /** When the scheduled poll runs (ms since the epoch). */
  #dueAt = Number.POSITIVE_INFINITY;
  #polling = false;
  /** An early poll asked for while one was running: the next one is due no later than this. */
  #wantedAt = Number.POSITIVE_INFINITY;
  #stopped = false;
  #leavePacer: (() => void) | null = null;

  constructor(intervalMs: number, deps: PollDeps) {
    this.#intervalMs = intervalMs;
    this.#deps = deps;
  }

  /**
   * Polls every interval from now on (an earlier poll already asked for stays). These polls take
   * their turn in the gateway's pacer: spread over the interval, and behind new mail on its way.
   */
  start(): void {
    this.#leavePacer ??= this.#deps.pacer.join();
    this.#schedule(Date.now() + this.#intervalMs, true);
  }

  /** Polls within `delayMs` (sooner than the interval, not paced: a pass waits for it); never two polls at once. */
  soon(delayMs: number): void {
    const at = Date.now() + delayMs;
    if (this.#polling) this.#wantedAt = Math.min(this.#wantedAt, at);
    else this.#schedule(at, false);
  }

  stop(): void {
    this.#stopped = true;
    clearTimeout(this.#timer);
    this.#leavePacer?.();
  }

  /** Sets the next poll for `at`, unless one is due earlier. */
  #schedule(at: number, paced: boolean): void {
    if (this.#stopped || this.#dueAt <= at) return;
    clearTimeout(this.#timer);
    this.#dueAt = at;
    this.#timer = setTimeout(() => this.#due(paced), Math.max(0, at - Date.now()));
  }

  #due(paced: boolean): void {
    this.#dueAt = Number.POSITIVE_INFINITY;
    // Polling from here on: an early poll asked for while this one waits for its turn comes after it.
    this.#polling = true;
    if (paced) void this.#deps.pacer.turn().then(() => this.#run());
    else this.#run();
  }

  #run(): void {
    if (this.#stopped) return;
    this.#poll().then(
      () => {
        this.#polling = false;
        const wanted = this.#wantedAt;
        this.#wantedAt = Number.POSITIVE_INFINITY;
        const next = this.#deps.listing.removalUnconfirmed
          ? Math.min(CONFIRM_REMOVAL_MS, this.#intervalMs)
          : this.#intervalMs;
        const at = Date.now() + next;
        this.#schedule(Math.min(at, wanted), next === this.#intervalMs && wanted >= at);
      },
      (err: unknown) => this.#deps.fail(err),
    );
  }

  async #poll(): Promise<void> {
    const deps = this.#deps;
    countPoll();
    const folders = await deps.refresh();
    // Without CONDSTORE nothing in STATUS shows a flag change: every folder's flags are re-read, the
    // IDLE ones too (a server need not tell an IDLE session of another session's flag change: Courier does not).
    const scanFlags = !deps.features().condstore;
    const selectable = folders.filter(isSelectable);
    // Folders that lost messages go first, and the others wait for their passes: a pass that finds an
    // expunge brings the other folders up to date first, telling the Worker what is leaving, so a
    // message moved by another client is one move, not a copy and then a delete. (The IDLE
    // connection may hear of the expunge late, or, on Cyrus without idled, only at its next check.)
    const losing = selectable.filter((f) => deps.listing.takeExpunged(f.path));
    await Promise.all(
      losing.map((folder) => {
        deps.listing.takeMoved(folder.path);
        deps.log.debug('poll wakes', { path: folder.path, expunged: true });
        return deps.wake(folder.path);
      }),
    );
    for (const folder of selectable) {
      if (losing.includes(folder)) continue;
      const cursor = deps.cursors.get(folder.path);
      const moved = deps.listing.takeMoved(folder.path);
      const behind =
        !cursor ||
        cursor.resync === true ||
        cursor.uidvalidity !== folder.uidvalidity ||
        folder.uidnext > cursor.last_uid + 1 ||
        (folder.highest_modseq !== null &&
          cursor.highest_modseq !== null &&
          folder.highest_modseq !== cursor.highest_modseq);
      const scan = scanFlags;
      const pending = deps.pending(folder.path);
      if (moved || behind || scan || pending) {
        deps.log.debug('poll wakes', { path: folder.path, moved, behind, scan, pending });
        void deps.wake(folder.path);
      }
    }
  }
}

/** The parts of a folder that the `folders` change carries and the Worker stores. */
function listingKey(f: FolderInfo): string {
  return JSON.stringify([f.path, f.delimiter, f.flags, f.special_use, f.uidvalidity, f.total]);
}
