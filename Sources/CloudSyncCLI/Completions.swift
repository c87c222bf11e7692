import Foundation

/// The shell completion scripts `cloudsync completions bash|zsh` prints, made from ``Commands`` so they list every
/// subcommand, option and choice value the parser accepts.
enum Completions {
    /// Every command that takes arguments (groups replaced by their subcommands), under its words joined by spaces.
    private static var leaves: [CommandSpec] {
        Commands.all.flatMap { $0.subcommands.isEmpty ? [$0] : $0.subcommands }
    }

    /// Words for `compgen -W` or `_values`: every long and short name of `command`'s options, `--help` included.
    private static func optionWords(_ command: CommandSpec) -> [String] {
        command.allOptions.flatMap { option in [option.long] + (option.short.map { ["-\($0)"] } ?? []) }
    }

    static var bash: String {
        let groups = Commands.all.filter { !$0.subcommands.isEmpty }
        var script = """
            # bash completion for cloudsync, printed by `cloudsync completions bash`.
            # Load it with: source <(cloudsync completions bash)
            # Names declared in the pipeline file on the line (the first word naming a file): jobs, providers, codecs.
            _cloudsync_names() {
                local i word
                for ((i = 2; i < COMP_CWORD; i++)); do
                    word=${COMP_WORDS[i]}
                    if [[ $word != -* && -f $word ]]; then
                        "${COMP_WORDS[0]}" __complete "$1" "$word" 2>/dev/null
                        return
                    fi
                done
            }
            _cloudsync() {
                local cur=${COMP_WORDS[COMP_CWORD]} prev=${COMP_WORDS[COMP_CWORD-1]}
                COMPREPLY=()
                if [[ $COMP_CWORD -eq 1 ]]; then
                    COMPREPLY=($(compgen -W "\(Commands.all.map(\.name).joined(separator: " ")) --version --help -h" -- "$cur"))
                    return
                fi
                local command=${COMP_WORDS[1]}
                case $command in

            """
        for group in groups {
            let names = group.subcommands.compactMap(\.path.last).joined(separator: " ")
            script += """
                        \(group.name))
                            if [[ $COMP_CWORD -eq 2 ]]; then
                                COMPREPLY=($(compgen -W "\(names) --help -h" -- "$cur"))
                                return
                            fi
                            command="\(group.name) ${COMP_WORDS[2]}"
                            ;;

                """
        }
        script += """
                esac
                case $command in

            """
        for command in leaves {
            script += "        \"\(command.name)\")\n            case $prev in\n"
            for option in command.options where !option.isFlag {
                let names = ([option.long] + (option.short.map { ["-\($0)"] } ?? [])).joined(separator: "|")
                let reply =
                    if let kind = option.completes {
                        "COMPREPLY=($(compgen -W \"$(_cloudsync_names \(kind.rawValue))\" -- \"$cur\")); return"
                    } else if option.choices.isEmpty {
                        "return"  // a path or a number: let bash complete file names
                    } else {
                        "COMPREPLY=($(compgen -W \"\(option.choices.joined(separator: " "))\" -- \"$cur\")); return"
                    }
                script += "                \(names)) \(reply) ;;\n"
            }
            script += "            esac\n"
            script += "            if [[ $cur == -* ]]; then\n"
            script +=
                "                COMPREPLY=($(compgen -W \"\(optionWords(command).joined(separator: " "))\" -- \"$cur\"))\n"
            let choices =
                command.path == ["help"]
                ? Commands.all.map(\.name) : command.arguments.flatMap(\.choices)
            if !choices.isEmpty {
                script += "            else\n"
                script +=
                    "                COMPREPLY=($(compgen -W \"\(choices.joined(separator: " "))\" -- \"$cur\"))\n"
            }
            script += "            fi\n            ;;\n"
        }
        script += """
                esac
            }
            complete -o default -F _cloudsync cloudsync

            """
        return script
    }

    static var zsh: String {
        var script = """
            #compdef cloudsync
            # zsh completion for cloudsync, printed by `cloudsync completions zsh`.
            # Save it as _cloudsync in a directory on $fpath, or load it with: source <(cloudsync completions zsh)

            # Names declared in the pipeline file on the line (the first word naming a file): jobs, providers, codecs.
            _cloudsync_names() {
                local word file
                for word in ${words[2,CURRENT-1]}; do
                    if [[ $word != -* && -f $word ]]; then file=$word; break; fi
                done
                [[ -n $file ]] || return 1
                local -a names
                names=(${(f)"$($cloudsync_command __complete $1 $file 2>/dev/null)"})
                compadd -a names
            }

            _cloudsync() {
                local line state cloudsync_command=$words[1]
                local -a subcommands
                subcommands=(

            """
        for command in Commands.all {
            script += "        '\(command.name):\(quoted(command.abstract, escaping: ":"))'\n"
        }
        script += """
                )
                _arguments -C \\
                    '(- *)--version[Print the version and exit]' \\
                    '(- *)'{-h,--help}'[Show help and exit]' \\
                    '1: :->command' \\
                    '*:: :->arguments'
                case $state in
                    command) _describe -t commands 'cloudsync subcommand' subcommands ;;
                    arguments)
                        case $words[1] in

            """
        for group in Commands.all {
            if group.subcommands.isEmpty {
                script +=
                    "                \(group.name)) _arguments \\\n" + arguments(group) + "                    ;;\n"
                continue
            }
            script += "                \(group.name))\n"
            script += "                    if (( CURRENT == 2 )); then\n"
            script += "                        local -a actions\n                        actions=(\n"
            for command in group.subcommands {
                script +=
                    "                            '\(command.path.last ?? ""):\(quoted(command.abstract, escaping: ":"))'\n"
            }
            script += "                        )\n"
            script += "                        _describe -t commands '\(group.name) subcommand' actions\n"
            script += "                        return\n                    fi\n"
            script += "                    shift words\n                    (( CURRENT-- ))\n"
            script += "                    case $words[1] in\n"
            for command in group.subcommands {
                script +=
                    "                        \(command.path.last ?? "")) _arguments \\\n" + arguments(command)
                    + "                            ;;\n"
            }
            script += "                    esac\n                    ;;\n"
        }
        script += """
                        esac
                        ;;
                esac
            }

            if [[ $zsh_eval_context[-1] == loadautofunc ]]; then
                _cloudsync "$@"
            else
                compdef _cloudsync cloudsync
            fi

            """
        return script
    }

    static var fish: String {
        var script = """
            # fish completion for cloudsync, printed by `cloudsync completions fish`.
            # Save it as ~/.config/fish/completions/cloudsync.fish, or load it with: cloudsync completions fish | source

            # Names declared in the pipeline file on the line (the first word naming a file): jobs, providers, codecs.
            function __cloudsync_names
                set -l words (commandline -opc)
                for word in $words[2..-1]
                    if not string match -q -- '-*' $word; and test -f $word
                        $words[1] __complete $argv[1] $word 2>/dev/null
                        return
                    end
                end
            end

            complete -c cloudsync -f
            complete -c cloudsync -n __fish_use_subcommand -l version -d 'Print the version and exit'
            complete -c cloudsync -n __fish_use_subcommand -s h -l help -d 'Show help and exit'

            """
        for command in Commands.all {
            script +=
                "complete -c cloudsync -n __fish_use_subcommand -a \(command.name) -d '\(fishQuoted(command.abstract))'\n"
        }
        for group in Commands.all where !group.subcommands.isEmpty {
            let members = group.subcommands.compactMap(\.path.last).joined(separator: " ")
            for command in group.subcommands {
                script +=
                    "complete -c cloudsync -n '__fish_seen_subcommand_from \(group.name); and not "
                    + "__fish_seen_subcommand_from \(members)' -a \(command.path.last ?? "") "
                    + "-d '\(fishQuoted(command.abstract))'\n"
            }
        }
        for command in leaves {
            var condition = "__fish_seen_subcommand_from \(command.path[0])"
            if command.path.count > 1 { condition += "; and __fish_seen_subcommand_from \(command.path[1])" }
            let prefix = "complete -c cloudsync -n '\(condition)'"
            for option in command.allOptions {
                var line = prefix + " -l \(option.name)" + (option.short.map { " -s \($0)" } ?? "")
                if let kind = option.completes {
                    line += " -x -a '(__cloudsync_names \(kind.rawValue))'"
                } else if !option.choices.isEmpty {
                    line += " -x -a '\(option.choices.joined(separator: " "))'"
                } else if option.valueName != nil {
                    line += option.takesPath ? " -r -F" : " -x"
                }
                script += line + " -d '\(fishQuoted(option.help))'\n"
            }
            let choices =
                command.path == ["help"] ? Commands.all.map(\.name) : command.arguments.flatMap(\.choices)
            if !choices.isEmpty {
                script += prefix + " -a '\(choices.joined(separator: " "))'\n"
            } else if !command.arguments.isEmpty {
                script += prefix + " -F\n"
            }
        }
        return script
    }

    /// `text` inside fish's single quotes, where only `\` and `'` need a backslash.
    private static func fishQuoted(_ text: String) -> String {
        text.replacingOccurrences(of: "\\", with: "\\\\").replacingOccurrences(of: "'", with: "\\'")
    }

    /// `_arguments` specs for `command`'s options and positionals, one continued line each.
    private static func arguments(_ command: CommandSpec) -> String {
        var specs: [String] = []
        for option in command.allOptions {
            let names = [option.long] + (option.short.map { ["-\($0)"] } ?? [])
            let exclusion = option.repeatable ? "*" : names.count > 1 ? "(\(names.joined(separator: " ")))" : ""
            let described = "[\(quoted(option.help, escaping: "[]"))]"
            var value = ""
            if let valueName = option.valueName {
                let action =
                    if let kind = option.completes {
                        "_cloudsync_names \(kind.rawValue)"
                    } else if !option.choices.isEmpty {
                        "(\(option.choices.joined(separator: " ")))"
                    } else {
                        option.takesPath ? "_files" : " "
                    }
                value = ":\(valueName):" + action
            }
            if names.count > 1 {
                specs.append("'\(exclusion)'{\(names.joined(separator: ","))}'\(described)\(value)'")
            } else {
                specs.append("'\(exclusion)\(option.long)\(described)\(value)'")
            }
        }
        for argument in command.arguments {
            let action =
                command.path == ["help"]
                ? "(\(Commands.all.map(\.name).joined(separator: " ")))"
                : argument.choices.isEmpty ? "_files" : "(\(argument.choices.joined(separator: " ")))"
            specs.append(
                "'\(argument.repeating ? "*" : "")\(argument.optional ? "::" : ":")\(argument.name):\(action)'")
        }
        return specs.map { "                    " + $0 }.joined(separator: " \\\n") + "\n"
    }

    /// `text` safe inside single quotes, with `characters` backslash-escaped for `_arguments`.
    private static func quoted(_ text: String, escaping characters: String) -> String {
        var result = ""
        for character in text {
            if character == "'" {
                result += "'\\''"
            } else {
                if characters.contains(character) { result += "\\" }
                result.append(character)
            }
        }
        return result
    }
}
