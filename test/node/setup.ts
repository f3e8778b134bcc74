// The test mail servers are on this machine: code of the gateway that runs inside a test file may
// connect to private addresses (a gateway process gets ALLOW_PRIVATE_MAIL_HOSTS=true instead).
import { configureMailHosts } from '../../gateway/mail-hosts.ts';

configureMailHosts({ allowPrivate: true });
