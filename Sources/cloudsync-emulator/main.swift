import CloudSyncEmulator
import Foundation

EmulatorCommand.main(Array(CommandLine.arguments.dropFirst()))
