/**
 * Stamps that order what this gateway did: each is above every earlier one of this process, and, as
 * they follow the clock in ms, above those of a process that ran before it on this machine. They say
 * which came first of two things the Worker cannot order itself: a session's start and another's (the
 * change stream's epoch), a folder listing's start and the end of a folder action.
 */
let last = 0;

export function nextStamp(): number {
  last = Math.max(Date.now(), last + 1);
  return last;
}
