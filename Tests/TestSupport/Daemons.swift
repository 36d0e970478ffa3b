#if canImport(XCTest)
    import Foundation
    import XCTest

    /// A real server from Debian, run in the foreground on loopback with a throwaway configuration
    /// in a directory of its own: nginx, haproxy, squid, dante, dovecot, exim, slapd, prosody. It listens on ports it holds
    /// itself (``Listeners/start``), `stop()` ends it and every process it started, by PID, and
    /// removes its directory (call it in a defer). Certificates come from ``TLSFixtures`` (a server
    /// certificate for localhost and 127.0.0.1, signed by its CA).
    public final class RealDaemon {
        /// The ports, in the order the daemon's constructor names them.
        public let ports: [UInt16]
        public let directory: String
        private let process: Spawned

        private init(
            _ name: String, ports count: Int, user: String? = nil, file: StaticString, line: UInt,
            configure: (_ directory: String, _ ports: [UInt16]) throws -> [String]
        ) throws {
            directory = FileManager.default.temporaryDirectory.appendingPathComponent("tincan-\(name)-\(getpid())-\(UUID().uuidString.prefix(8))").path
            try FileManager.default.createDirectory(atPath: directory, withIntermediateDirectories: true)
            let directory = self.directory
            let certs = TLSFixtures.shared
            for item in ["server.pem", "server.key", "ca.pem"] {
                try FileManager.default.copyItem(atPath: certs.path(item), toPath: "\(directory)/\(item)")
            }
            do {
                (process, ports) = try Listeners.start(ports: count, file: file, line: line, describe: { RealDaemon.logs(directory) }) { ports in
                    // The daemon's user owns the directory and the certificates; the configuration the
                    // constructor writes next stays root's (exim insists).
                    if let user { RealDaemon.run(["/bin/chown", "-R", user, directory]) }
                    let arguments = try configure(directory, ports)
                    let process = try Spawned(arguments, output: "\(directory)/stdout.log", errors: "\(directory)/stderr.log")
                    return process
                }
            } catch {
                try? FileManager.default.removeItem(atPath: directory)
                throw error
            }
        }

        /// Ends it (SIGTERM, then SIGKILL), with every process it started, and removes its files.
        public func stop() {
            Listeners.stop(process, grace: .seconds(3))
            try? FileManager.default.removeItem(atPath: directory)
        }

        /// A file of the daemon's directory, as text ("" if none).
        public func text(_ name: String) -> String { (try? String(contentsOfFile: "\(directory)/\(name)", encoding: .utf8)) ?? "" }

        /// The logs of `directory`, for a failure message.
        static func logs(_ directory: String) -> String {
            let names = (try? FileManager.default.contentsOfDirectory(atPath: directory)) ?? []
            return names.filter { $0.hasSuffix(".log") || $0.hasSuffix("log") }.sorted().map { name in
                "\(name): " + String(((try? String(contentsOfFile: "\(directory)/\(name)", encoding: .utf8)) ?? "").suffix(1500))
            }.joined(separator: "\n")
        }

        @discardableResult
        static func run(_ arguments: [String], input: String? = nil) -> Int32 {
            let process = Process()
            process.executableURL = URL(fileURLWithPath: arguments[0])
            process.arguments = Array(arguments.dropFirst())
            process.standardOutput = FileHandle.nullDevice
            process.standardError = FileHandle.nullDevice
            let pipe = Pipe()
            process.standardInput = pipe
            guard (try? process.run()) != nil else { return -1 }
            if let input { try? pipe.fileHandleForWriting.write(contentsOf: Data(input.utf8)) }
            try? pipe.fileHandleForWriting.close()
            process.waitUntilExit()
            return process.terminationStatus
        }

        private static func write(_ text: String, _ path: String, mode: Int = 0o644) throws {
            try text.write(toFile: path, atomically: false, encoding: .utf8)
            try FileManager.default.setAttributes([.posixPermissions: mode], ofItemAtPath: path)
        }

        // MARK: The daemons

        /// The start of an nginx configuration in the foreground with its files in `dir`, loading `module`.
        private static func nginxHead(_ dir: String, module: String) -> String {
            """
            daemon off;
            master_process on;
            worker_processes 1;
            user root;
            pid \(dir)/nginx.pid;
            error_log \(dir)/error.log info;
            load_module /usr/lib/nginx/modules/\(module).so;
            events { worker_connections 256; }
            """
        }

        /// nginx with four servers, in this order of ``ports``: `slow` answers every request with
        /// "slow reply\n" after `delay` seconds (the echo module), `https` is a TLS reverse proxy
        /// to it (ALPN h2 and http/1.1), `plain` a plain reverse proxy to it, and `proxyProtocol`
        /// reads a PROXY protocol header and answers "client ADDRESS PORT\n" with what it said.
        public static func nginx(delay: Int = 2, file: StaticString = #filePath, line: UInt = #line) throws -> RealDaemon {
            try RealDaemon("nginx", ports: 4, file: file, line: line) { dir, p in
                try write(
                    """
                    \(nginxHead(dir, module: "ngx_http_echo_module"))
                    http {
                        access_log \(dir)/access.log;
                        client_body_temp_path \(dir)/body; proxy_temp_path \(dir)/proxy; fastcgi_temp_path \(dir)/fastcgi;
                        uwsgi_temp_path \(dir)/uwsgi; scgi_temp_path \(dir)/scgi;
                        server { listen 127.0.0.1:\(p[0]); location / { echo_sleep \(delay); echo "slow reply"; } }
                        server {
                            listen 127.0.0.1:\(p[1]) ssl http2;
                            ssl_certificate \(dir)/server.pem; ssl_certificate_key \(dir)/server.key;
                            location / { proxy_pass http://127.0.0.1:\(p[0]); }
                        }
                        server { listen 127.0.0.1:\(p[2]); location / { proxy_pass http://127.0.0.1:\(p[0]); } }
                        server {
                            listen 127.0.0.1:\(p[3]) proxy_protocol;
                            location / { return 200 "client $proxy_protocol_addr $proxy_protocol_port\\n"; }
                        }
                    }
                    """, "\(dir)/nginx.conf")
                return ["/usr/sbin/nginx", "-c", "\(dir)/nginx.conf", "-p", dir]
            }
        }

        /// nginx as two web sites, `a` and `b` in this order of ``ports``, each answering a GET
        /// with "site NAME PATH auth=PROXY-AUTHORIZATION\n" (keeping HTTP/1.1 connections open,
        /// as nginx does), and `/echo` with the request body it read (chunked or not) after
        /// "site NAME got ". Each logs the requests it got to `NAME.log` in ``directory``.
        public static func nginxSites(file: StaticString = #filePath, line: UInt = #line) throws -> RealDaemon {
            try RealDaemon("nginx-sites", ports: 2, file: file, line: line) { dir, p in
                let site = { (name: String, port: UInt16) in
                    """
                        server {
                            listen 127.0.0.1:\(port); access_log \(dir)/\(name).log plain;
                            location / { return 200 "site \(name) $request_uri auth=$http_proxy_authorization\\n"; }
                            location /echo { echo_read_request_body; echo -n "site \(name) got "; echo_request_body; }
                        }
                    """
                }
                try write(
                    """
                    \(nginxHead(dir, module: "ngx_http_echo_module"))
                    http {
                        log_format plain '$request';
                        client_body_temp_path \(dir)/body; proxy_temp_path \(dir)/proxy; fastcgi_temp_path \(dir)/fastcgi;
                        uwsgi_temp_path \(dir)/uwsgi; scgi_temp_path \(dir)/scgi;
                    \(site("a", p[0]))
                    \(site("b", p[1]))
                    }
                    """, "\(dir)/nginx.conf")
                return ["/usr/sbin/nginx", "-c", "\(dir)/nginx.conf", "-p", dir]
            }
        }

        /// haproxy as a TCP load balancer in front of `target` (a port on 127.0.0.1), telling it
        /// each client with the PROXY protocol, in this order of ``ports``: 127.0.0.1 with v1
        /// (`send-proxy`), 127.0.0.1 with v2 (`send-proxy-v2`), ::1 with v1, ::1 with v2; and
        /// `echo`, an HTTP frontend that reads a PROXY header (`accept-proxy`) and answers
        /// "src=ADDR sport=PORT dst=ADDR dport=PORT". Clients of the Unix socket `lb.sock` in its
        /// ``directory`` are sent as v1 UNKNOWN. `source`: the address haproxy connects to
        /// `target` from (127.0.0.1 when nil). `checks`: the v2 backend health-checks `target`
        /// every 100 ms with a PROXY v2 LOCAL header (`check check-send-proxy`).
        public static func haproxyBalancer(
            to target: UInt16, from source: String? = nil, checks: Bool = false, file: StaticString = #filePath, line: UInt = #line
        ) throws -> RealDaemon {
            let from = source.map { " source \($0)" } ?? ""
            let check = checks ? " check check-send-proxy inter 100ms" : ""
            return try RealDaemon("haproxy", ports: 5, file: file, line: line) { dir, p in
                try write(
                    """
                    global
                      log stderr format short local0 info
                    defaults
                      log global
                      mode tcp
                      timeout connect 5s
                      timeout client 10s
                      timeout server 10s
                    frontend v1
                      bind 127.0.0.1:\(p[0])
                      bind unix@\(dir)/lb.sock
                      default_backend v1
                    frontend v2
                      bind 127.0.0.1:\(p[1])
                      default_backend v2
                    frontend v1six
                      bind [::1]:\(p[2])
                      default_backend v1
                    frontend v2six
                      bind [::1]:\(p[3])
                      default_backend v2
                    backend v1
                      server target 127.0.0.1:\(target) send-proxy\(from)
                    backend v2
                      server target 127.0.0.1:\(target) send-proxy-v2\(from)\(check)
                    frontend echo
                      mode http
                      bind 127.0.0.1:\(p[4]) accept-proxy
                      http-request return status 200 content-type text/plain lf-string "src=%[src] sport=%[src_port] dst=%[dst] dport=%[dst_port]\\n"

                    """, "\(dir)/haproxy.cfg")
                return ["/usr/sbin/haproxy", "-db", "-f", "\(dir)/haproxy.cfg"]
            }
        }

        /// nginx's stream module as a TCP proxy in front of `target` (a port on 127.0.0.1) with
        /// `proxy_protocol on` (v1) and `proxy_half_close on` (a client's end of stream is passed on,
        /// not taken for the end of both directions), listening on 127.0.0.1 and ::1, in this order of
        /// ``ports``.
        public static func nginxStream(to target: UInt16, file: StaticString = #filePath, line: UInt = #line) throws -> RealDaemon {
            try RealDaemon("nginx-stream", ports: 2, file: file, line: line) { dir, p in
                try write(
                    """
                    \(nginxHead(dir, module: "ngx_stream_module"))
                    stream {
                        server { listen 127.0.0.1:\(p[0]); proxy_pass 127.0.0.1:\(target); proxy_protocol on; proxy_half_close on; }
                        server { listen [::1]:\(p[1]); proxy_pass 127.0.0.1:\(target); proxy_protocol on; proxy_half_close on; }
                    }
                    """, "\(dir)/nginx.conf")
                return ["/usr/sbin/nginx", "-c", "\(dir)/nginx.conf", "-p", dir]
            }
        }

        /// squid as an HTTP proxy (CONNECT and plain requests) that wants Basic credentials
        /// `user`:`password`; names are never looked up (its DNS points at loopback).
        /// With `https`, a second port (``ports``[1]) serves the same proxy inside TLS (squid's
        /// `https_port`, as the squid-openssl build has it), with ``TLSFixtures``' server
        /// certificate: an HTTPS proxy.
        public static func squid(user: String, password: String, https: Bool = false, file: StaticString = #filePath, line: UInt = #line) throws -> RealDaemon {
            try RealDaemon("squid", ports: https ? 2 : 1, user: "proxy", file: file, line: line) { dir, p in
                let hash = try RealDaemon.output(["/usr/bin/openssl", "passwd", "-apr1", password])
                try write("\(user):\(hash)\n", "\(dir)/passwd")
                let tls = https ? "https_port 127.0.0.1:\(p[1]) tls-cert=\(dir)/server.pem tls-key=\(dir)/server.key\n" : ""
                try write(
                    """
                    \(tls)http_port 127.0.0.1:\(p[0])
                    visible_hostname proxy.test
                    dns_nameservers 127.0.0.1
                    pid_filename \(dir)/squid.pid
                    cache_log \(dir)/cache.log
                    access_log stdio:\(dir)/access.log
                    cache_store_log none
                    cache deny all
                    coredump_dir \(dir)
                    shutdown_lifetime 0 seconds
                    auth_param basic program /usr/lib/squid/basic_ncsa_auth \(dir)/passwd
                    acl authed proxy_auth REQUIRED
                    http_access allow authed
                    http_access deny all
                    """, "\(dir)/squid.conf")
                return ["/usr/sbin/squid", "-N", "-f", "\(dir)/squid.conf"]
            }
        }

        /// dante as a SOCKS5 server that wants a user name and password (RFC 1929), checked
        /// against the system's users: ``ensureSystemUser(_:password:)`` makes one.
        public static func dante(file: StaticString = #filePath, line: UInt = #line) throws -> RealDaemon {
            try RealDaemon("dante", ports: 1, file: file, line: line) { dir, p in
                try write(
                    """
                    logoutput: \(dir)/danted.log
                    internal: 127.0.0.1 port = \(p[0])
                    external: 127.0.0.1
                    socksmethod: username
                    clientmethod: none
                    user.privileged: root
                    user.unprivileged: nobody
                    client pass { from: 127.0.0.0/8 to: 0.0.0.0/0 }
                    socks pass { from: 127.0.0.0/8 to: 127.0.0.0/8 command: connect }
                    """, "\(dir)/danted.conf")
                return ["/usr/sbin/danted", "-f", "\(dir)/danted.conf", "-p", "\(dir)/danted.pid"]
            }
        }

        /// A system user for dante's username method, made if missing (with `password`); remove it
        /// with ``removeSystemUser(_:)``.
        public static func ensureSystemUser(_ name: String, password: String) {
            if run(["/usr/bin/id", name]) != 0 {
                run(["/usr/sbin/useradd", "-M", "-d", "/nonexistent", "-s", "/usr/sbin/nologin", name])
            }
            run(["/usr/sbin/chpasswd"], input: "\(name):\(password)\n")
        }

        public static func removeSystemUser(_ name: String) { run(["/usr/sbin/userdel", name]) }

        /// dovecot serving IMAP (``ports``[0]) and POP3 ([1]) with STARTTLS, one user `user` with
        /// `password`, and its failed-login delay (`auth_failure_delay`, 2 s).
        public static func dovecot(user: String, password: String, file: StaticString = #filePath, line: UInt = #line) throws -> RealDaemon {
            try RealDaemon("dovecot", ports: 2, file: file, line: line) { dir, p in
                try write("\(user):{PLAIN}\(password)\n", "\(dir)/passwd")
                for sub in ["run", "state", "home"] { try FileManager.default.createDirectory(atPath: "\(dir)/\(sub)", withIntermediateDirectories: true) }
                try write(
                    """
                    base_dir = \(dir)/run
                    state_dir = \(dir)/state
                    log_path = \(dir)/dovecot.log
                    protocols = imap pop3
                    listen = 127.0.0.1
                    ssl = yes
                    ssl_cert = <\(dir)/server.pem
                    ssl_key = <\(dir)/server.key
                    disable_plaintext_auth = no
                    auth_mechanisms = plain
                    auth_failure_delay = 2 secs
                    passdb {
                      driver = passwd-file
                      args = \(dir)/passwd
                    }
                    userdb {
                      driver = static
                      args = uid=nobody gid=nogroup home=\(dir)/home/%u
                    }
                    mail_location = maildir:\(dir)/home/%u/Maildir
                    service imap-login {
                      inet_listener imap {
                        port = \(p[0])
                      }
                      inet_listener imaps {
                        port = 0
                      }
                    }
                    service pop3-login {
                      inet_listener pop3 {
                        port = \(p[1])
                      }
                      inet_listener pop3s {
                        port = 0
                      }
                    }
                    """, "\(dir)/dovecot.conf")
                return ["/usr/sbin/dovecot", "-F", "-c", "\(dir)/dovecot.conf"]
            }
        }

        /// exim as an SMTP server for the host name mx.test that offers STARTTLS (unless
        /// `offerTLS` is false) and refuses every recipient.
        public static func exim(offerTLS: Bool = true, file: StaticString = #filePath, line: UInt = #line) throws -> RealDaemon {
            try RealDaemon("exim", ports: 1, user: "Debian-exim", file: file, line: line) { dir, p in
                try FileManager.default.createDirectory(atPath: "\(dir)/spool", withIntermediateDirectories: true)
                RealDaemon.run(["/bin/chown", "Debian-exim", "\(dir)/spool"])
                // exim reads a configuration given with -C only if root owns it and no one else may write it.
                try write(
                    """
                    keep_environment =
                    primary_hostname = mx.test
                    exim_user = Debian-exim
                    exim_group = Debian-exim
                    spool_directory = \(dir)/spool
                    log_file_path = \(dir)/exim-%slog
                    pid_file_path = \(dir)/exim.pid
                    daemon_smtp_ports = \(p[0])
                    local_interfaces = 127.0.0.1
                    tls_advertise_hosts = \(offerTLS ? "*" : "")
                    tls_certificate = \(dir)/server.pem
                    tls_privatekey = \(dir)/server.key
                    host_lookup =
                    rfc1413_hosts =
                    acl_smtp_rcpt = acl_check_rcpt
                    begin acl
                    acl_check_rcpt:
                      deny
                    begin routers
                    begin transports
                    """, "\(dir)/exim.conf")
                return ["/usr/sbin/exim4", "-C", "\(dir)/exim.conf", "-bdf"]
            }
        }

        /// slapd (OpenLDAP) serving dc=test, with StartTLS when `tls` (else it answers StartTLS
        /// with protocolError, "unsupported extended operation").
        public static func slapd(tls: Bool, file: StaticString = #filePath, line: UInt = #line) throws -> RealDaemon {
            try RealDaemon("slapd", ports: 1, file: file, line: line) { dir, p in
                try FileManager.default.createDirectory(atPath: "\(dir)/db", withIntermediateDirectories: true)
                try write(
                    """
                    include /etc/ldap/schema/core.schema
                    pidfile \(dir)/slapd.pid
                    argsfile \(dir)/slapd.args
                    modulepath /usr/lib/ldap
                    moduleload back_mdb
                    \(tls ? "TLSCertificateFile \(dir)/server.pem\nTLSCertificateKeyFile \(dir)/server.key" : "")
                    database mdb
                    suffix "dc=test"
                    directory \(dir)/db
                    """, "\(dir)/slapd.conf")
                return ["/usr/sbin/slapd", "-d", "0", "-f", "\(dir)/slapd.conf", "-h", "ldap://127.0.0.1:\(p[0])/"]
            }
        }

        /// prosody (XMPP) serving the domain `localhost` on a client port with STARTTLS; other
        /// domains get a host-unknown stream error.
        public static func prosody(file: StaticString = #filePath, line: UInt = #line) throws -> RealDaemon {
            try RealDaemon("prosody", ports: 1, file: file, line: line) { dir, p in
                try FileManager.default.createDirectory(atPath: "\(dir)/data", withIntermediateDirectories: true)
                try write(
                    """
                    run_as_root = true
                    pidfile = "\(dir)/prosody.pid"
                    data_path = "\(dir)/data"
                    log = { info = "\(dir)/prosody.log" }
                    c2s_ports = { \(p[0]) }
                    c2s_interfaces = { "127.0.0.1" }
                    s2s_ports = { }
                    c2s_direct_tls_ports = { }
                    http_ports = { }
                    https_ports = { }
                    modules_enabled = { "tls"; "saslauth"; "disco" }
                    modules_disabled = { "s2s" }
                    certificates = "\(dir)"
                    VirtualHost "localhost"
                      ssl = { certificate = "\(dir)/server.pem"; key = "\(dir)/server.key" }
                    """, "\(dir)/prosody.cfg.lua")
                return ["/usr/bin/prosody", "-F", "--config", "\(dir)/prosody.cfg.lua"]
            }
        }

        private static func output(_ arguments: [String]) throws -> String {
            let process = Process()
            process.executableURL = URL(fileURLWithPath: arguments[0])
            process.arguments = Array(arguments.dropFirst())
            let pipe = Pipe()
            process.standardOutput = pipe
            try process.run()
            let data = pipe.fileHandleForReading.readDataToEndOfFile()
            process.waitUntilExit()
            return String(decoding: data, as: UTF8.self).trimmingCharacters(in: .whitespacesAndNewlines)
        }
    }
#endif
