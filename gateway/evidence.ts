/**
 * Evidence for the account's emails left in no folder (common/relay.ts `OrphanState`): the account's
 * object deletes such an email only once every folder has been read through by a pass that began
 * after it left. The gateway keeps the latest mark the Worker told it; a pass notes that mark when
 * it begins and, while the Worker waits for evidence, reports (`passed`) that it read the folder
 * through. Kept across the sessions of one lease, like the cursors.
 */
import type { Change, OrphanState } from '../common/relay.ts';

export class Evidence {
  #mark: number;
  #waiting: boolean;
  /** The mark when the latest folder listing began, and the latest one reported. */
  #listed = 0;
  #listedReported = -1;
  /** Per folder, the mark its last reported pass began with. */
  #reported = new Map<string, number>();

  constructor(state: OrphanState | undefined) {
    this.#mark = state?.mark ?? 0;
    this.#waiting = state?.waiting ?? false;
  }

  /** The Worker's answer to a lease or a batch. */
  take(state: OrphanState | undefined): void {
    if (!state) return;
    this.#mark = Math.max(this.#mark, state.mark);
    this.#waiting = state.waiting;
  }

  /** The mark a pass (or a listing) beginning now is known to begin after. */
  get mark(): number {
    return this.#mark;
  }

  /** A folder listing that began with `mark` was read (and reported when it changed). */
  listed(mark: number): void {
    this.#listed = Math.max(this.#listed, mark);
  }

  /** Whether the Worker waits for a pass over this folder (one that begins now would count). */
  needs(path: string): boolean {
    return this.#waiting && (this.#reported.get(path) ?? -1) < this.#mark;
  }

  /** The `passed` change for a pass over `path` that began with `started` and read it through, when the Worker waits for one. */
  report(path: string, uidvalidity: number, started: number): Change | null {
    if (!this.#waiting) return null;
    this.#reported.set(path, Math.max(this.#reported.get(path) ?? -1, started));
    this.#listedReported = this.#listed;
    return { type: 'passed', listed: this.#listed, folders: [{ path, uidvalidity, started }] };
  }

  /** After a listing: the `passed` change saying so, when the Worker waits and has not been told of one this recent. */
  listingReport(): Change | null {
    if (!this.#waiting || this.#listed <= this.#listedReported) return null;
    this.#listedReported = this.#listed;
    return { type: 'passed', listed: this.#listed, folders: [] };
  }

  forget(path: string): void {
    this.#reported.delete(path);
  }
}
