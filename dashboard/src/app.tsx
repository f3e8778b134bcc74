/** The shell: sign-in, or the navigation and the section named by the URL's fragment (#mailboxes, …). */
import { useEffect, useState } from 'hono/jsx/dom';
import { ApiKeysSection } from './api-keys.tsx';
import { EmailsSection } from './emails.tsx';
import { GatewaysSection } from './gateways.tsx';
import { MailboxesSection } from './mailboxes.tsx';
import { currentKey, onSessionChange, signOut } from './session.ts';
import { SignIn } from './sign-in.tsx';
import { WebhooksSection } from './webhooks.tsx';

const SECTIONS = [
  { id: 'mailboxes', title: 'Mailboxes', view: MailboxesSection },
  { id: 'api-keys', title: 'API keys', view: ApiKeysSection },
  { id: 'webhooks', title: 'Webhooks', view: WebhooksSection },
  { id: 'emails', title: 'Emails', view: EmailsSection },
  { id: 'gateways', title: 'Gateways', view: GatewaysSection },
] as const;

const sectionFromHash = () => SECTIONS.find((s) => `#${s.id}` === location.hash) ?? SECTIONS[0];

export function App() {
  const [signedIn, setSignedIn] = useState(currentKey() !== null);
  const [reason, setReason] = useState<string | null>(null);
  const [section, setSection] = useState(sectionFromHash());
  // Choosing the section already shown starts it afresh (back from an open email to the list).
  const [visit, setVisit] = useState(0);

  useEffect(
    () =>
      onSessionChange((why) => {
        setSignedIn(currentKey() !== null);
        setReason(why);
      }),
    [],
  );
  useEffect(() => {
    const follow = () => setSection(sectionFromHash());
    addEventListener('hashchange', follow);
    return () => removeEventListener('hashchange', follow);
  }, []);
  useEffect(() => {
    document.title = signedIn ? `${section.title} · mailbox-edge` : 'Sign in · mailbox-edge';
  }, [signedIn, section]);

  if (!signedIn) return <SignIn reason={reason} />;
  const View = section.view;
  return (
    <div class="shell">
      <header>
        <span class="brand">mailbox-edge</span>
        <nav aria-label="Sections">
          {SECTIONS.map((s) => (
            <a
              href={`#${s.id}`}
              aria-current={s.id === section.id ? 'page' : undefined}
              onClick={() => s.id === section.id && setVisit(visit + 1)}
            >
              {s.title}
            </a>
          ))}
        </nav>
        <button type="button" onClick={() => signOut(null)}>
          Sign out
        </button>
      </header>
      <main>
        <h1>{section.title}</h1>
        <View key={`${section.id}-${visit}`} />
      </main>
    </div>
  );
}
