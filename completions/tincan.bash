# Generated from the option table by 'tincan --generate-docs'; do not edit.
_tincan() {
    local cur prev cmd i
    cur="${COMP_WORDS[COMP_CWORD]}"
    prev="${COMP_WORDS[COMP_CWORD-1]}"
    cmd=""
    for ((i = 1; i < COMP_CWORD; i++)); do
        case "${COMP_WORDS[i]}" in
            connect|listen|tls|ws|udp-send|udp-recv|join-group) cmd="${COMP_WORDS[i]}"; break ;;
        esac
    done
    if [[ -z "$cmd" ]]; then
        COMPREPLY=($(compgen -W "connect listen tls ws udp-send udp-recv join-group help -h --help --version" -- "$cur"))
        return
    fi
    case "$cmd" in
        connect)
            case "$prev" in
                --netns|--serial|--pty-link|--proxy-ca|--proxy-cert|--proxy-key|-o|--output|--hex-dump|--pcap|-U|--unix|--ca|--cert|--key|--keylog|--replay) COMPREPLY=($(compgen -f -- "$cur")); return ;;
                --interface|--tun-name) COMPREPLY=($(compgen -W "$(ls /sys/class/net 2>/dev/null)" -- "$cur")); return ;;
                -e|--exec|-c|--sh-exec) COMPREPLY=($(compgen -c -- "$cur")); return ;;
                --baud) COMPREPLY=($(compgen -W "50 75 110 134 150 200 300 600 1200 1800 2400 4800 9600 19200 38400 57600 115200 230400 460800 500000 576000 921600 1000000 1152000 1500000 2000000 2500000 3000000 3500000 4000000" -- "$cur")); return ;;
                --data-bits) COMPREPLY=($(compgen -W "5 6 7 8" -- "$cur")); return ;;
                --parity) COMPREPLY=($(compgen -W "none even odd mark space" -- "$cur")); return ;;
                --stop-bits) COMPREPLY=($(compgen -W "1 2" -- "$cur")); return ;;
                --flow) COMPREPLY=($(compgen -W "none rtscts xonxoff" -- "$cur")); return ;;
                -X|--proxy-type) COMPREPLY=($(compgen -W "4 5 connect" -- "$cur")); return ;;
                --starttls) COMPREPLY=($(compgen -W "smtp lmtp pop3 imap ftp xmpp nntp sieve ldap postgres mysql irc" -- "$cur")); return ;;
                --tls-min) COMPREPLY=($(compgen -W "1.2 1.3" -- "$cur")); return ;;
                --tls-max) COMPREPLY=($(compgen -W "1.2 1.3" -- "$cur")); return ;;
                --replay-match) COMPREPLY=($(compgen -W "exact length none" -- "$cur")); return ;;
                -f|--format) COMPREPLY=($(compgen -W "raw hex json" -- "$cur")); return ;;
                -w|--wait|--connect-timeout|-s|--source|--attempt-delay|--retry|--retry-delay|--reconnect|--fd|--dscp|--tos|--mark|--sockopt|--tun|--proxy|--proxy-user|-x|--proxy-address|--idle-timeout|--user-timeout|-q|--quit-after-eof|--pty-term|--pty-size|--escape|--servername|--alpn|--pin|--xmpphost|--ciphers|--ciphersuites|--curves|--send|--expect|--expect-timeout|--replay-speed|--replay-stream|--parallel|--chunk|--max-size|--psk|--psk-identity|--mtu|--handshake-timeout) return ;;
            esac
            if [[ "$cur" == -* ]]; then
                COMPREPLY=($(compgen -W "-h --help --help-all -v --verbose -4 --ipv4 -6 --ipv6 -w --wait --connect-timeout -s --source --interface --prefer-ipv4 --prefer-ipv6 --attempt-delay --retry --retry-delay --reconnect --fd --dscp --tos --netns --mark --sockopt --mptcp --fastopen --serial --baud --data-bits --parity --stop-bits --flow --pty-link --tun --tun-name --proxy --proxy-ca --proxy-insecure --proxy-cert --proxy-key --proxy-user --no-proxy -x --proxy-address -X --proxy-type --idle-timeout --keepalive --user-timeout -q --quit-after-eof --no-shutdown --crlf --hex -o --output --hex-dump --pcap --append-output --capture-best-effort --progress --force-progress -U --unix -e --exec -c --sh-exec --pty --pty-term --pty-size --raw --escape --no-window-size --tls --servername --ca --cert --key --alpn --insecure --pin --show-cert --keylog --half-close --starttls --xmpphost --tls-min --tls-max --ciphers --ciphersuites --curves --send --expect --expect-timeout --json --timing --stats --replay --replay-match --replay-speed --replay-stream --replay-list -z --zero-io --parallel -u --udp --lines --strip-newline --chunk --whole -f --format --max-size --psk --psk-identity --mtu --handshake-timeout" -- "$cur"))
            else
                COMPREPLY=($(compgen -A hostname -- "$cur"))
            fi
            ;;
        listen)
            case "$prev" in
                --netns|--serial|--pty-link|--forward-unix|--forward-ca|--forward-cert|--forward-key|--proxy-auth-file|--proxy-ca|--proxy-cert|--proxy-key|-o|--output|--hex-dump|--pcap|-U|--unix|--cert|--key|--ca|--keylog|--replay) COMPREPLY=($(compgen -f -- "$cur")); return ;;
                --tun-name) COMPREPLY=($(compgen -W "$(ls /sys/class/net 2>/dev/null)" -- "$cur")); return ;;
                -e|--exec|-c|--sh-exec) COMPREPLY=($(compgen -c -- "$cur")); return ;;
                --baud) COMPREPLY=($(compgen -W "50 75 110 134 150 200 300 600 1200 1800 2400 4800 9600 19200 38400 57600 115200 230400 460800 500000 576000 921600 1000000 1152000 1500000 2000000 2500000 3000000 3500000 4000000" -- "$cur")); return ;;
                --data-bits) COMPREPLY=($(compgen -W "5 6 7 8" -- "$cur")); return ;;
                --parity) COMPREPLY=($(compgen -W "none even odd mark space" -- "$cur")); return ;;
                --stop-bits) COMPREPLY=($(compgen -W "1 2" -- "$cur")); return ;;
                --flow) COMPREPLY=($(compgen -W "none rtscts xonxoff" -- "$cur")); return ;;
                --proxy-protocol) COMPREPLY=($(compgen -W "v1 v2" -- "$cur")); return ;;
                --accept-proxy-protocol) COMPREPLY=($(compgen -W "v1 v2 any" -- "$cur")); return ;;
                --tls-min) COMPREPLY=($(compgen -W "1.2 1.3" -- "$cur")); return ;;
                --tls-max) COMPREPLY=($(compgen -W "1.2 1.3" -- "$cur")); return ;;
                --replay-match) COMPREPLY=($(compgen -W "exact length none" -- "$cur")); return ;;
                -f|--format) COMPREPLY=($(compgen -W "raw hex json" -- "$cur")); return ;;
                --allow-origin|--protocol|-m|--max-conns|--max-pending-per-source|--send-timeout|--allow|--deny|--dscp|--tos|--mark|--sockopt|--tun|--pty-term|--pty-size|--forward|--forward-servername|--forward-pin|--forward-alpn|--proxy-protocol-from|--connect-timeout|-s|--source|--forward-retry|--retry-delay|--proxy-auth|--allow-dest|--deny-dest|--proxy|--proxy-user|--idle-timeout|--user-timeout|-q|--quit-after-eof|--handshake-timeout|--alpn|--ciphers|--ciphersuites|--curves|--psk|--psk-identity|--mtu|--send|--expect|--expect-timeout|--replay-speed|--replay-stream|--chunk|--max-size|--max-message|--close-timeout|--ping-interval|--ping-timeout) return ;;
            esac
            if [[ "$cur" == -* ]]; then
                COMPREPLY=($(compgen -W "-h --help --help-all -v --verbose -4 --ipv4 -6 --ipv6 -k --keep-open --stdio-socket -u --udp --ws --allow-origin --protocol --broker --chat -m --max-conns --max-pending-per-source --send-timeout --allow --deny --dscp --tos --netns --mark --sockopt --reuseport --mptcp --fastopen --transparent --serial --baud --data-bits --parity --stop-bits --flow --pty-link --tun --tun-name --rfc2217 -e --exec -c --sh-exec --pty --pty-term --pty-size --forward --forward-unix --forward-tls --forward-servername --forward-ca --forward-insecure --forward-pin --forward-alpn --forward-cert --forward-key --proxy-protocol --accept-proxy-protocol --proxy-protocol-from --connect-timeout -s --source --forward-retry --retry-delay --socks5 --http-proxy --proxy-auth --proxy-auth-file --allow-dest --deny-dest --open --proxy --proxy-ca --proxy-insecure --proxy-cert --proxy-key --proxy-user --idle-timeout --keepalive --user-timeout -q --quit-after-eof --no-shutdown --crlf --hex -o --output --hex-dump --pcap --append-output --capture-best-effort --progress --force-progress -U --unix --tls --cert --key --ca --require-client-cert --handshake-timeout --alpn --keylog --tls-min --tls-max --ciphers --ciphersuites --curves --psk --psk-identity --mtu --send --expect --expect-timeout --json --timing --stats --replay --replay-match --replay-speed --replay-stream --replay-list --lines --strip-newline --chunk --whole -f --format --max-size --binary --jsonl --max-message --close-timeout --ping-interval --ping-timeout --no-deflate --echo" -- "$cur"))
            else
                COMPREPLY=($(compgen -A hostname -- "$cur"))
            fi
            ;;
        tls)
            case "$prev" in
                --netns|--serial|--pty-link|--proxy-ca|--proxy-cert|--proxy-key|-o|--output|--hex-dump|--pcap|--ca|--cert|--key|--keylog|--replay) COMPREPLY=($(compgen -f -- "$cur")); return ;;
                --interface) COMPREPLY=($(compgen -W "$(ls /sys/class/net 2>/dev/null)" -- "$cur")); return ;;
                --baud) COMPREPLY=($(compgen -W "50 75 110 134 150 200 300 600 1200 1800 2400 4800 9600 19200 38400 57600 115200 230400 460800 500000 576000 921600 1000000 1152000 1500000 2000000 2500000 3000000 3500000 4000000" -- "$cur")); return ;;
                --data-bits) COMPREPLY=($(compgen -W "5 6 7 8" -- "$cur")); return ;;
                --parity) COMPREPLY=($(compgen -W "none even odd mark space" -- "$cur")); return ;;
                --stop-bits) COMPREPLY=($(compgen -W "1 2" -- "$cur")); return ;;
                --flow) COMPREPLY=($(compgen -W "none rtscts xonxoff" -- "$cur")); return ;;
                -X|--proxy-type) COMPREPLY=($(compgen -W "4 5 connect" -- "$cur")); return ;;
                --starttls) COMPREPLY=($(compgen -W "smtp lmtp pop3 imap ftp xmpp nntp sieve ldap postgres mysql irc" -- "$cur")); return ;;
                --tls-min) COMPREPLY=($(compgen -W "1.2 1.3" -- "$cur")); return ;;
                --tls-max) COMPREPLY=($(compgen -W "1.2 1.3" -- "$cur")); return ;;
                --replay-match) COMPREPLY=($(compgen -W "exact length none" -- "$cur")); return ;;
                -w|--wait|--connect-timeout|-s|--source|--attempt-delay|--retry|--retry-delay|--reconnect|--fd|--dscp|--tos|--mark|--sockopt|--proxy|--proxy-user|-x|--proxy-address|--idle-timeout|--user-timeout|-q|--quit-after-eof|--servername|--alpn|--pin|--xmpphost|--ciphers|--ciphersuites|--curves|--send|--expect|--expect-timeout|--replay-speed|--replay-stream|--escape) return ;;
            esac
            if [[ "$cur" == -* ]]; then
                COMPREPLY=($(compgen -W "-h --help --help-all -v --verbose -4 --ipv4 -6 --ipv6 -w --wait --connect-timeout -s --source --interface --prefer-ipv4 --prefer-ipv6 --attempt-delay --retry --retry-delay --reconnect --fd --dscp --tos --netns --mark --sockopt --mptcp --fastopen --serial --baud --data-bits --parity --stop-bits --flow --pty-link --proxy --proxy-ca --proxy-insecure --proxy-cert --proxy-key --proxy-user --no-proxy -x --proxy-address -X --proxy-type --idle-timeout --keepalive --user-timeout -q --quit-after-eof --no-shutdown --crlf --hex -o --output --hex-dump --pcap --append-output --capture-best-effort --progress --force-progress --servername --ca --cert --key --alpn --insecure --pin --show-cert --keylog --half-close --starttls --xmpphost --tls-min --tls-max --ciphers --ciphersuites --curves --send --expect --expect-timeout --json --timing --stats --replay --replay-match --replay-speed --replay-stream --replay-list --raw --escape --no-window-size" -- "$cur"))
            else
                COMPREPLY=($(compgen -A hostname -- "$cur"))
            fi
            ;;
        ws)
            case "$prev" in
                --netns|--serial|--pty-link|--proxy-ca|--proxy-cert|--proxy-key|-o|--output|--hex-dump|--pcap|-U|--unix|--ca|--cert|--key|--keylog|--replay) COMPREPLY=($(compgen -f -- "$cur")); return ;;
                --interface) COMPREPLY=($(compgen -W "$(ls /sys/class/net 2>/dev/null)" -- "$cur")); return ;;
                --baud) COMPREPLY=($(compgen -W "50 75 110 134 150 200 300 600 1200 1800 2400 4800 9600 19200 38400 57600 115200 230400 460800 500000 576000 921600 1000000 1152000 1500000 2000000 2500000 3000000 3500000 4000000" -- "$cur")); return ;;
                --data-bits) COMPREPLY=($(compgen -W "5 6 7 8" -- "$cur")); return ;;
                --parity) COMPREPLY=($(compgen -W "none even odd mark space" -- "$cur")); return ;;
                --stop-bits) COMPREPLY=($(compgen -W "1 2" -- "$cur")); return ;;
                --flow) COMPREPLY=($(compgen -W "none rtscts xonxoff" -- "$cur")); return ;;
                -X|--proxy-type) COMPREPLY=($(compgen -W "4 5 connect" -- "$cur")); return ;;
                --tls-min) COMPREPLY=($(compgen -W "1.2 1.3" -- "$cur")); return ;;
                --tls-max) COMPREPLY=($(compgen -W "1.2 1.3" -- "$cur")); return ;;
                --replay-match) COMPREPLY=($(compgen -W "exact length none" -- "$cur")); return ;;
                -w|--wait|--connect-timeout|-s|--source|--attempt-delay|--retry|--retry-delay|--reconnect|--fd|--dscp|--tos|--mark|--sockopt|--proxy|--proxy-user|-x|--proxy-address|--idle-timeout|--user-timeout|-q|--quit-after-eof|--servername|--alpn|--pin|--ciphers|--ciphersuites|--curves|--send|--expect|--expect-timeout|--replay-speed|--replay-stream|--max-message|--close-timeout|--ping-interval|--ping-timeout|--chunk|-H|--header|--origin|--protocol) return ;;
            esac
            if [[ "$cur" == -* ]]; then
                COMPREPLY=($(compgen -W "-h --help --help-all -v --verbose -4 --ipv4 -6 --ipv6 -w --wait --connect-timeout -s --source --interface --prefer-ipv4 --prefer-ipv6 --attempt-delay --retry --retry-delay --reconnect --fd --dscp --tos --netns --mark --sockopt --mptcp --fastopen --serial --baud --data-bits --parity --stop-bits --flow --pty-link --proxy --proxy-ca --proxy-insecure --proxy-cert --proxy-key --proxy-user --no-proxy -x --proxy-address -X --proxy-type --idle-timeout --keepalive --user-timeout -q --quit-after-eof --no-shutdown --hex -o --output --hex-dump --pcap --append-output --capture-best-effort --progress --force-progress -U --unix --servername --ca --cert --key --alpn --insecure --pin --show-cert --keylog --half-close --tls-min --tls-max --ciphers --ciphersuites --curves --send --expect --expect-timeout --json --timing --stats --replay --replay-match --replay-speed --replay-stream --replay-list --binary --jsonl --max-message --close-timeout --ping-interval --ping-timeout --no-deflate --echo --chunk --whole -H --header --origin --protocol" -- "$cur"))
            else
                COMPREPLY=($(compgen -A hostname -- "$cur"))
            fi
            ;;
        udp-send)
            case "$prev" in
                -U|--unix|--netns|--pcap) COMPREPLY=($(compgen -f -- "$cur")); return ;;
                --interface) COMPREPLY=($(compgen -W "$(ls /sys/class/net 2>/dev/null)" -- "$cur")); return ;;
                -f|--format) COMPREPLY=($(compgen -W "raw hex json" -- "$cur")); return ;;
                -m|--message|--chunk|-n|--count|-i|--interval|--ttl|-s|--source|-W|--wait-reply|--dscp|--tos|--mark|--sockopt|--max-size|--send|--expect|--expect-timeout) return ;;
            esac
            if [[ "$cur" == -* ]]; then
                COMPREPLY=($(compgen -W "-h --help --help-all -v --verbose -4 --ipv4 -6 --ipv6 -U --unix -m --message --lines --strip-newline --chunk --whole -n --count -i --interval -b --broadcast --ttl --interface -s --source -W --wait-reply --dscp --tos --netns --mark --sockopt -f --format --max-size --pcap --append-output --capture-best-effort --send --expect --expect-timeout --json --timing --stats" -- "$cur"))
            else
                COMPREPLY=($(compgen -A hostname -- "$cur"))
            fi
            ;;
        udp-recv)
            case "$prev" in
                -U|--unix|--pcap|--netns) COMPREPLY=($(compgen -f -- "$cur")); return ;;
                -f|--format) COMPREPLY=($(compgen -W "raw hex json" -- "$cur")); return ;;
                --max-size|-n|--count|-t|--timeout|--rcvbuf|--dscp|--tos|--mark|--sockopt) return ;;
            esac
            if [[ "$cur" == -* ]]; then
                COMPREPLY=($(compgen -W "-h --help --help-all -v --verbose --stats -4 --ipv4 -6 --ipv6 -U --unix -f --format --max-size --pcap --append-output --capture-best-effort -n --count -t --timeout --echo --rcvbuf --dscp --tos --netns --mark --sockopt --reuseport" -- "$cur"))
            else
                COMPREPLY=($(compgen -A hostname -- "$cur"))
            fi
            ;;
        join-group)
            case "$prev" in
                --pcap|--netns) COMPREPLY=($(compgen -f -- "$cur")); return ;;
                --interface) COMPREPLY=($(compgen -W "$(ls /sys/class/net 2>/dev/null)" -- "$cur")); return ;;
                -f|--format) COMPREPLY=($(compgen -W "raw hex json" -- "$cur")); return ;;
                --source|--max-size|-n|--count|-t|--timeout|--rcvbuf|--dscp|--tos|--mark|--sockopt) return ;;
            esac
            if [[ "$cur" == -* ]]; then
                COMPREPLY=($(compgen -W "-h --help --help-all -v --verbose --stats --interface --source -f --format --max-size --pcap --append-output --capture-best-effort -n --count -t --timeout --echo --rcvbuf --dscp --tos --netns --mark --sockopt --reuseport" -- "$cur"))
            else
                COMPREPLY=($(compgen -A hostname -- "$cur"))
            fi
            ;;
    esac
}
complete -F _tincan tincan
